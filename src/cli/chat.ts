// `nbx chat`: a conversation through the model's chat template, history kept. Reads lines from stdin
// (a terminal or a pipe); `/exit` or end of input (Ctrl-D) ends it; Ctrl-C stops the current reply.

import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { NbxError, ValueError } from '../errors.js';
import type { ChatMessage } from '../tokenizer/index.js';
import { resolveConfig } from '../generation/index.js';
import { checkOptionsEarly, formatStats, MODEL_FLAGS, interruptFlag, loadForCommand, runGeneration, samplingOptions } from './generate.js';

const OP = 'nbx chat';

export async function chatCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { ...MODEL_FLAGS, system: { type: 'string' } } });
  if (positionals.length > 0) throw new ValueError(OP, `takes no arguments (type the messages), got '${positionals.join(' ')}'`);
  checkOptionsEarly(values, OP);
  const { model, tokenizer, loadMs, device, dir } = await loadForCommand(OP, values.model, values.device, values.dtype);
  const interactive = process.stdin.isTTY === true;
  const interrupt = interruptFlag();
  try {
    if (!tokenizer.chat_template) {
      throw new ValueError(OP, `${dir} has no chat template (tokenizer_config.json chat_template or chat_template.jinja): use nbx generate for a base model`);
    }
    const { opts, seed } = samplingOptions(values, model, OP);
    resolveConfig(model, opts);
    const context = model.config.max_position_embeddings ?? Infinity;
    const maxNew = opts.max_new_tokens!;
    process.stderr.write(`nbx: loaded ${dir} on ${device} in ${loadMs.toFixed(0)} ms; /exit or Ctrl-D ends the chat\n`);
    const history: ChatMessage[] = values.system ? [{ role: 'system', content: values.system }] : [];
    const rl = createInterface({ input: process.stdin, output: interactive ? process.stdout : undefined, terminal: interactive });
    // A terminal's Ctrl-C reaches readline, not the process: during a reply it stops the reply, at the prompt it ends the chat.
    let replying = false;
    rl.on('SIGINT', () => { if (replying) interrupt.trigger(); else rl.close(); });
    if (interactive) { rl.setPrompt('> '); rl.prompt(); }
    let turn = 0;
    for await (const raw of rl) {
      const line = raw.trim();
      if (line === '/exit' || line === '/quit') break;
      if (line === '') { if (interactive) rl.prompt(); continue; }
      history.push({ role: 'user', content: line });
      let ids = tokenizer.apply_chat_template(history, { add_generation_prompt: true }) as number[];
      // Oldest turns go when the conversation no longer fits; the user is told.
      while (ids.length + maxNew > context && history.length > 1) {
        const first = history[0]!.role === 'system' ? 1 : 0;
        if (history.length - first <= 1) break;
        history.splice(first, 2);
        ids = tokenizer.apply_chat_template(history, { add_generation_prompt: true }) as number[];
        process.stderr.write('nbx: the oldest turn was dropped to fit the model\'s context\n');
      }
      replying = true;
      let stats;
      try {
        stats = await runGeneration(model, tokenizer, ids, { ...opts, max_new_tokens: Math.min(maxNew, Math.max(1, context - ids.length)) },
          (s) => process.stdout.write(s), interrupt.stopped);
      } catch (e) {
        // A message the model cannot take (too long, say) is reported; the conversation goes on without it.
        if (!(e instanceof NbxError)) throw e;
        process.stderr.write(`nbx: ${e.name}: ${e.message}\n`);
        history.pop();
        if (interactive) rl.prompt();
        continue;
      } finally { replying = false; }
      process.stdout.write('\n');
      history.push({ role: 'assistant', content: stats.text.trim() });
      turn++;
      process.stderr.write(`nbx: ${formatStats(stats, turn === 1 && opts.do_sample !== false ? `; seed ${seed}` : '')}\n`);
      if (stats.interrupted) interrupt.reset();
      if (interactive) rl.prompt();
    }
    rl.close();
    return 0;
  } finally {
    interrupt.dispose();
    model.dispose();
  }
}
