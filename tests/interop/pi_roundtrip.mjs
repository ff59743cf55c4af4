// Drives the upstream pi agent's own SessionManager for tests/interop/test_pi_agent.py.
//
//   node pi_roundtrip.mjs <pi-install-dir> read <session.jsonl>...
//       -> [{"header", "entries", "leafId", "context", "labels"}] of each file as pi
//          loads it (one Node start for many files: starting Node is the slow part)
//   node pi_roundtrip.mjs <pi-install-dir> write <session-dir> <cwd>
//       -> writes a session with pi (messages, model and thinking changes, a branch, a
//          label, a compaction, a custom message) and prints {"file", "leafId"}
//
// <pi-install-dir> is where `npm install @mariozechner/pi-coding-agent` ran; the package
// is loaded from there through its public entry point (dist/index.js).
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [installDir, command, ...rest] = process.argv.slice(2);
const entry = join(installDir, "node_modules", "@mariozechner", "pi-coding-agent", "dist", "index.js");
const { SessionManager } = await import(pathToFileURL(entry).href);

function labelsOf(manager) {
	const labels = {};
	for (const e of manager.getEntries()) {
		const label = manager.getLabel(e.id);
		if (label !== undefined) labels[e.id] = label;
	}
	return labels;
}

function read(file) {
	const manager = SessionManager.open(file);
	return {
		header: manager.getHeader(),
		entries: manager.getEntries(),
		leafId: manager.getLeafId(),
		context: manager.buildSessionContext(),
		labels: labelsOf(manager),
	};
}

const usage = { input: 10, output: 5, cacheRead: 1, cacheWrite: 0, totalTokens: 16, cost: { input: 0.001, output: 0.002, cacheRead: 0, cacheWrite: 0, total: 0.003 } };

function user(text, ts) {
	return { role: "user", content: [{ type: "text", text }], timestamp: ts };
}

function assistant(text, ts) {
	return {
		role: "assistant",
		content: [{ type: "text", text }],
		api: "anthropic-messages",
		provider: "anthropic",
		model: "claude-test",
		usage,
		stopReason: "stop",
		timestamp: ts,
	};
}

function write(sessionDir, cwd) {
	const manager = SessionManager.create(cwd, sessionDir);
	manager.appendModelChange("anthropic", "claude-test");
	manager.appendThinkingLevelChange("high");
	const first = manager.appendMessage(user("first question from pi", 1_700_000_000_000));
	const answer = manager.appendMessage(assistant("first answer from pi", 1_700_000_001_000));
	manager.appendMessage(user("a branch that will be left", 1_700_000_002_000));
	manager.appendMessage(assistant("left behind", 1_700_000_003_000));
	manager.branch(answer);
	manager.appendLabelChange(first, "start");
	manager.appendMessage(user("second question on the new branch", 1_700_000_004_000));
	manager.appendMessage(assistant("second answer", 1_700_000_005_000));
	manager.appendCompaction("pi summary of the start", answer, 1234);
	manager.appendCustomMessageEntry("note", "a custom note from pi", true, { k: 1 });
	manager.appendMessage(user("after the compaction", 1_700_000_006_000));
	manager.appendMessage(assistant("final answer", 1_700_000_007_000));
	return { file: manager.getSessionFile(), leafId: manager.getLeafId() };
}

let result;
if (command === "read") result = rest.map(read);
else if (command === "write") result = write(rest[0], rest[1]);
else {
	console.error(`unknown command ${command}`);
	process.exit(2);
}
process.stdout.write(JSON.stringify(result));
