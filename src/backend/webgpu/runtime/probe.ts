/// <reference types="@webgpu/types" />
// `nbx info`'s WebGPU line: is there an adapter, which one, through which path, and which device
// profile applies. Never throws; gives the reason when nothing comes up.

import { chooseAdapter, profileFor } from './gpu.js';

export interface WebGPUProbe { available: boolean; description?: string; reason?: string }

export async function probeWebGPU(): Promise<WebGPUProbe> {
  try {
    const c = await chooseAdapter();
    const prof = await profileFor(c.adapter);
    const f16 = c.adapter.features.has('shader-f16') ? ', shader-f16' : '';
    const via = c.via === 'browser' ? 'navigator.gpu' : `Dawn ${c.via === 'default' ? 'default backend' : c.via}${c.compatibility ? ', compatibility mode' : ''}`;
    const profile = prof.family ? `device profile ${prof.family}` : `no device profile, generic defaults (${prof.reason})`;
    return { available: true, description: `${c.description} (${via}${f16}); ${profile}` };
  } catch (e) {
    return { available: false, reason: (e as Error).message };
  }
}
