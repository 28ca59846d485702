// The shim as a file import: its own module so a missing build is a catchable import error in
// ffi.ts instead of a failure to load the CLI. In a compiled binary this is the embedded copy.
import path from "../../native/build/librlx.so" with { type: "file" };
export default path;
