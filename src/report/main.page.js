// Browser code of `rlx report`: reads the page's data (window.RLX, from src/report/html.ts) and
// lays the page out: runs and the smoothing slider, the overview (training reward beside
// held-out eval per env), step time, a section per metric family, the rollout viewer.

function section(title, open = true) {
  const details = document.createElement("details");
  details.open = open;
  const summary = document.createElement("summary");
  summary.textContent = title;
  details.appendChild(summary);
  const body = document.createElement("div");
  body.className = "panels";
  details.appendChild(body);
  document.getElementById("charts").appendChild(details);
  return body;
}

function header(runs, smoothing) {
  const head = document.getElementById("runs");
  for (const [i, run] of runs.entries()) {
    const line = document.createElement("div");
    const last = run.rows[run.rows.length - 1];
    line.innerHTML = `<span class="swatch" style="background:${runColor(i)}"></span>`;
    line.appendChild(
      document.createTextNode(
        `${run.name}: ${run.dir}, ${run.rows.length} lines${last ? `, last step ${last.step}` : ""}`,
      ),
    );
    head.appendChild(line);
  }
  const slider = document.getElementById("smoothing");
  const shown = document.getElementById("smoothing-value");
  slider.value = String(smoothing.value);
  shown.textContent = slider.value;
  slider.oninput = () => {
    smoothing.value = Number(slider.value);
    shown.textContent = slider.value;
    refreshCharts();
  };
}

function main() {
  const runs = window.RLX.runs;
  const smoothing = { value: runs.some((r) => r.rows.length > 30) ? 0.6 : 0 };
  header(runs, smoothing);
  const keys = metricKeys(runs);
  const overview = overviewPanels(keys);
  const shown = new Set(overview.flatMap((row) => row.keys));
  if (overview.length) {
    const body = section("reward and held-out eval, per env");
    for (const row of overview) {
      const line = document.createElement("div");
      line.className = "panel-row";
      body.appendChild(line);
      for (const key of row.keys) metricPanel(line, runs, key, smoothing);
    }
  }
  const time = section("step time");
  runs.forEach((run, i) => timePanel(time, run, i));
  for (const { name, keys: familyKeys } of familySections(keys, shown)) {
    const body = section(`${name} (${familyKeys.length})`, FAMILY_ORDER.includes(name));
    for (const key of familyKeys) metricPanel(body, runs, key, smoothing);
  }
  if (runs.some((run) => run.samples.length > 0)) drawViewer();
  else document.getElementById("viewer").textContent = "no audit records (rollouts/step_N.jsonl) in these runs";
  document.body.dataset.ready = "true";
}

main();
