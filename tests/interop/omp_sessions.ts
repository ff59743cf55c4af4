// How the real omp 18 sees session files, through its own modules (run with the Bun
// that runs omp; OMP_PACKAGE_DIR is the installed @oh-my-pi/pi-coding-agent package):
//
//   bun omp_sessions.ts load FILE...   each file as `omp --resume FILE` loads it: the
//                                      title (slot folded over the header), its source,
//                                      the entry types, malformed/invalid counts
//   bun omp_sessions.ts list DIR       omp's session list of a project dir (the /resume
//                                      picker): path, id, title, message count
//   bun omp_sessions.ts recent DIR     omp's recent-sessions list (welcome screen): names
//                                      come from history.db's session_titles first
//   bun omp_sessions.ts slot TITLE SOURCE UPDATED_AT
//                                      the 256-byte title slot omp writes for that title
//                                      (SOURCE "" for none), as a JSON string
//
// Output: one JSON document on stdout. Read-only: nothing here writes a session file
// (history.db's title index may be backfilled by `recent`, as omp itself does).
import * as path from "node:path";

const pkg = process.env.OMP_PACKAGE_DIR;
if (!pkg) throw new Error("OMP_PACKAGE_DIR is not set");
const src = (module: string) => path.join(pkg, "src", "session", module);

const [command, ...args] = process.argv.slice(2);
const loader = await import(src("session-loader.ts"));
const listing = await import(src("session-listing.ts"));
const { FileSessionStorage } = await import(src("session-storage.ts"));
const titleSlot = await import(src("session-title-slot.ts"));
const storage = new FileSessionStorage();

async function load(file: string) {
	const loaded = await loader.loadSessionFile(file, storage);
	const header = loaded.entries.find((e: { type: string }) => e.type === "session");
	return {
		file,
		title: header?.title ?? null,
		titleSource: header?.titleSource ?? null,
		slot: loaded.titleSlot ?? null,
		id: header?.id ?? null,
		types: loaded.entries.map((e: { type: string }) => e.type),
		malformedRecords: loaded.malformedRecords,
		invalidHeader: loaded.invalidHeader,
	};
}

let result: unknown;
if (command === "load") {
	result = await Promise.all(args.map(load));
} else if (command === "list") {
	const sessions = await listing.listSessionsReadOnly(args[0], storage);
	result = sessions.map((s: { path: string; id: string; title?: string; messageCount: number }) => ({
		path: s.path,
		id: s.id,
		title: s.title ?? null,
		messageCount: s.messageCount,
	}));
} else if (command === "recent") {
	const recent = await listing.getRecentSessions(args[0], 50, storage);
	result = recent.map((s: { path: string; name: string }) => ({ path: s.path, name: s.name }));
} else if (command === "slot") {
	const [title, source, updatedAt] = args;
	result = titleSlot.serializeTitleSlot({ title, source: source || undefined, updatedAt });
} else {
	throw new Error(`unknown command ${command}`);
}
process.stdout.write(JSON.stringify(result));
