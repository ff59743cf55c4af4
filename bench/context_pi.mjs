// Times the upstream pi agent's own buildSessionContext for bench/bench_context_pi.py.
//
//   node context_pi.mjs <pi-install-dir> <repeat> <session.jsonl>...
//       -> [{"file", "messages", "best_ms"}] per file: SessionManager.open (not timed),
//          then the best of <repeat> calls of manager.buildSessionContext().
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [installDir, repeatArg, ...files] = process.argv.slice(2);
const entry = join(installDir, "node_modules", "@mariozechner", "pi-coding-agent", "dist", "index.js");
const { SessionManager } = await import(pathToFileURL(entry).href);
const repeat = Number.parseInt(repeatArg, 10);

function bestOf(manager) {
	let best = Infinity;
	let messages = 0;
	for (let i = 0; i < repeat; i++) {
		const start = process.hrtime.bigint();
		const context = manager.buildSessionContext();
		const elapsed = Number(process.hrtime.bigint() - start) / 1e6;
		messages = context.messages.length;
		if (elapsed < best) best = elapsed;
	}
	return { messages, best };
}

const results = files.map((file) => {
	const { messages, best } = bestOf(SessionManager.open(file));
	return { file, messages, best_ms: best };
});
process.stdout.write(JSON.stringify(results));
