// Browser code of `rlx report`: the rollout viewer's controls, its list of samples and the
// sample shown (viewer.page.js draws the tokens).

const LIST_LIMIT = 300;
const viewer = { run: 0, step: "all", env: "all", algo: "all", order: "step", selected: null };

function option(select, value, label) {
  const o = document.createElement("option");
  o.value = String(value);
  o.textContent = label;
  select.appendChild(o);
}

function control(bar, label, values, key) {
  const wrap = document.createElement("label");
  wrap.textContent = `${label} `;
  const select = document.createElement("select");
  select.id = `viewer-${key}`;
  for (const [value, text] of values) option(select, value, text);
  select.value = String(viewer[key]);
  select.onchange = () => {
    viewer[key] = key === "run" ? Number(select.value) : select.value;
    if (key === "run") Object.assign(viewer, { step: "all", env: "all", algo: "all" });
    viewer.selected = null;
    drawViewer();
  };
  wrap.appendChild(select);
  bar.appendChild(wrap);
}

function filtered(run) {
  let list = run.samples.filter(
    (s) =>
      (viewer.step === "all" || s.step === Number(viewer.step)) &&
      (viewer.env === "all" || s.env === viewer.env) &&
      (viewer.algo === "all" || s.algo === viewer.algo),
  );
  if (viewer.order === "failed") list = list.filter((s) => s.reward <= 0);
  if (viewer.order === "worst") list = [...list].sort((a, b) => a.reward - b.reward);
  if (viewer.order === "best") list = [...list].sort((a, b) => b.reward - a.reward);
  return list;
}

function drawViewer() {
  const root = document.getElementById("viewer");
  root.textContent = "";
  const runs = window.RLX.runs;
  const run = runs[viewer.run];
  const bar = document.createElement("div");
  bar.className = "controls";
  root.appendChild(bar);
  const distinct = (f) => [...new Set(run.samples.map(f))].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  if (runs.length > 1)
    control(
      bar,
      "run",
      runs.map((r, i) => [i, r.name]),
      "run",
    );
  control(bar, "step", [["all", "all"], ...distinct((s) => s.step).map((s) => [s, String(s)])], "step");
  control(bar, "env", [["all", "all"], ...distinct((s) => s.env).map((e) => [e, e])], "env");
  control(bar, "algorithm", [["all", "all"], ...distinct((s) => s.algo).map((a) => [a, a])], "algo");
  control(
    bar,
    "show",
    [
      ["step", "in step order"],
      ["worst", "worst first"],
      ["best", "best first"],
      ["failed", "failed (reward ≤ 0)"],
    ],
    "order",
  );
  const note = document.createElement("p");
  note.className = "note";
  note.textContent =
    `${run.samples.length} trained samples from ${run.steps.shown} of ${run.steps.audited} audited steps` +
    (run.note ? `; ${run.note}` : "");
  root.appendChild(note);
  if (run.samples.length === 0) return;
  const list = filtered(run);
  const body = document.createElement("div");
  body.className = "viewer-body";
  root.appendChild(body);
  const table = document.createElement("div");
  table.className = "sample-list";
  body.appendChild(table);
  const detail = document.createElement("div");
  detail.className = "sample";
  detail.id = "sample";
  body.appendChild(detail);
  if (viewer.selected === null || !list.includes(viewer.selected)) viewer.selected = list[0] ?? null;
  for (const s of list.slice(0, LIST_LIMIT)) {
    const row = document.createElement("div");
    row.className = "sample-row" + (s === viewer.selected ? " selected" : "");
    row.textContent = `step ${s.step} · ${s.env} · ${s.algo} · reward ${fmt(s.reward)}`;
    row.onclick = () => {
      viewer.selected = s;
      drawViewer();
    };
    table.appendChild(row);
  }
  if (list.length > LIST_LIMIT) table.appendChild(document.createTextNode(`… ${list.length - LIST_LIMIT} more`));
  if (viewer.selected) drawSample(detail, run, viewer.selected);
}

function drawSample(detail, run, sample) {
  detail.dataset.rollout = sample.rollout;
  detail.dataset.index = String(sample.index);
  const head = document.createElement("div");
  head.className = "sample-head";
  head.textContent =
    `step ${sample.step} · env ${sample.env} · ${sample.algo} · task ${sample.task} · reward ${fmt(sample.reward)}` +
    ` · advantage ${sample.advantage === null ? "none" : fmt(sample.advantage)}${sample.replayed ? " · replayed" : ""}`;
  detail.appendChild(head);
  const group = run.samples.filter((s) => s.step === sample.step && s.group === sample.group);
  const rewards = document.createElement("div");
  rewards.className = "group";
  rewards.appendChild(document.createTextNode(`group ${sample.group}: `));
  for (const member of group) {
    const chip = document.createElement("button");
    chip.className = "chip" + (member === sample ? " current" : "");
    chip.textContent = fmt(member.reward);
    chip.title = `advantage ${member.advantage === null ? "none" : fmt(member.advantage)}`;
    chip.onclick = () => {
      viewer.selected = member;
      drawViewer();
    };
    rewards.appendChild(chip);
  }
  detail.appendChild(rewards);
  const legend = document.createElement("div");
  legend.className = "credit-legend";
  legend.innerHTML =
    '<span class="tok rl" style="background:rgba(22,163,74,.6)">advantage &gt; 0</span> ' +
    '<span class="tok rl" style="background:rgba(220,38,38,.6)">advantage &lt; 0</span> ' +
    '<span class="tok ce" style="background:rgba(37,99,235,.6)">ce weight</span> ' +
    '<span class="tok kl" style="background:rgba(147,51,234,.6)">ref_kl weight</span> ' +
    '<span class="tok distill" style="background:rgba(234,88,12,.6)">distill weight</span> ' +
    '<span class="tok zeroed">action, no credit</span> <span class="tok masked">masked (not trained)</span> ' +
    '<span class="tool-call">tool call</span>';
  detail.appendChild(legend);
  const maxAdv = maxRlAdvantage(sample);
  for (const turn of turns(sample)) detail.appendChild(renderTurn(run, sample, turn, maxAdv));
}
