// Text imports (`with { type: "text" }`): the page's browser scripts, its stylesheet and uPlot's
// build arrive as strings, embedded in the compiled binary (src/report/assets.ts).
declare module "*.page.js" {
  const text: string;
  export default text;
}
declare module "*.css" {
  const text: string;
  export default text;
}
declare module "uplot/dist/uPlot.iife.min.js" {
  const text: string;
  export default text;
}
