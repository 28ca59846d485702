// The shim this build ships, as file imports: its own module so a missing build is a catchable
// import error in shim_path.ts instead of a failure to load the CLI. In a compiled binary these
// are embedded copies: the library, what it was built against (torch.json), and its sources
// (shim_sources.json), from which a node with another libtorch compiles its own (shim_path.ts).
import path from "../../native/build/librlx.so" with { type: "file" };
import sources from "../../native/build/shim_sources.json";
import builtAgainst from "../../native/build/torch.json";

export default { path, builtAgainst, sources: sources as Record<string, string> };
