// `import path from "x.so" with { type: "file" }` yields the file's path (see shim_file.ts).
declare module "*.so" {
  const path: string;
  export default path;
}
