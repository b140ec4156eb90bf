export async function run(_args: string[]): Promise<void> { process.stdout.write("cpu bench: not yet\n"); }
