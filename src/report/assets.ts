// What the report page inlines, as text imports so that `bun build --compile` embeds them in
// dist/rlx (the binary alone writes the page, offline): uPlot (MIT, from npm) and its stylesheet,
// the page's stylesheet, and its browser scripts in the order they load.
import uplotCss from "uplot/dist/uPlot.min.css" with { type: "text" };
import uplotJs from "uplot/dist/uPlot.iife.min.js" with { type: "text" };
import browse from "./browse.page.js" with { type: "text" };
import charts from "./charts.page.js" with { type: "text" };
import main from "./main.page.js" with { type: "text" };
import pageCss from "./page.css" with { type: "text" };
import panels from "./panels.page.js" with { type: "text" };
import viewer from "./viewer.page.js" with { type: "text" };

export const STYLES = [uplotCss, pageCss];
export const SCRIPTS = [uplotJs, panels, charts, viewer, browse, main];
