"use strict";
// The page reads and prints without this script; it adds search, the SKU picker, the driver check, "Get
// started" (the environment to use on the picked SKU and its commands, with Copy buttons), keyboard movement
// through the grids and state in the URL fragment (#sku=b300&q=h100&driver-nvidia=550.54.15&env=...).
const data = JSON.parse(document.getElementById("data").textContent);
const $ = (selector, root = document) => root.querySelector(selector);
const $$ = (selector, root = document) => Array.from(root.querySelectorAll(selector));
const search = document.getElementById("q");
const select = document.getElementById("sku");
const skus = new Map(data.skus.map(s => [s.id, s]));
const state = { q: "", sku: null, env: null, drivers: {} };

// ------------------------------------------------------------------------------------------------ URL state

function readHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  state.q = params.get("q") || "";
  state.sku = skus.has(params.get("sku")) ? params.get("sku") : null;
  state.env = params.get("env") in data.envs ? params.get("env") : null;
  state.drivers = {};
  for (const family of data.families) {
    const value = params.get("driver-" + family);
    if (value) state.drivers[family] = value;
  }
}

function writeHash() {
  const params = new URLSearchParams();
  if (state.sku) params.set("sku", state.sku);
  if (state.env) params.set("env", state.env);
  if (state.q) params.set("q", state.q);
  for (const [family, value] of Object.entries(state.drivers)) if (value) params.set("driver-" + family, value);
  const text = params.toString();
  const url = location.pathname + location.search + (text ? "#" + text : "");
  try { history.replaceState(null, "", url); } catch (e) { location.hash = text; }
}

// ------------------------------------------------------------------------------------------------ driver check

function parts(version) {
  const match = /^\s*(\d+(?:\.\d+)*)/.exec(version || "");
  return match ? match[1].split(".").map(Number) : null;
}

function compare(a, b) {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] || 0) - (b[i] || 0);
    if (d) return d < 0 ? -1 : 1;
  }
  return 0;
}

function hasPrefix(version, prefix) {
  return version === prefix || version.startsWith(prefix + ".") || version.startsWith(prefix + "-");
}

// The host check's driver rule (accelenv check, driver.version) for one SKU and environment: null when it passes.
function driverVerdict(envId, sku, text) {
  const env = data.envs[envId];
  const rule = env.driver;
  const found = parts(text);
  if (!found) return { status: "warn", why: `"${text}" is not a driver version` };
  const fail = [], warn = [];
  if (rule.max && compare(found, parts(rule.max)) >= 0) fail.push(`driver ${text} is at or above ${rule.max}`);
  if (rule.min && compare(found, parts(rule.min)) < 0) {
    if (rule.compat_min && compare(found, parts(rule.compat_min)) >= 0) {
      warn.push(`driver ${text} is below ${rule.min}: ${env.runtime} runs only through compatibility mode`);
    } else {
      fail.push(`driver ${text} is below ${rule.compat_min || rule.min}, the oldest ${env.runtime} runs on`);
    }
  }
  if (sku.driver_min && compare(found, parts(sku.driver_min)) < 0) {
    fail.push(`${sku.name} needs driver ${sku.driver_min} or newer`);
  }
  if (rule.accepted.length && !rule.accepted.some(p => hasPrefix(text.trim(), p))) {
    warn.push(`driver ${text} is not one known to work with ${env.runtime}`);
  }
  const documented = rule.releases.slice().sort((a, b) => compare(parts(a.reports), parts(b.reports)));
  if (documented.length && !documented.some(r => hasPrefix(text.trim(), r.reports))) {
    if (compare(found, parts(documented[0].reports)) < 0) {
      fail.push(`driver ${text} is older than every driver documented for ${env.runtime}`);
    } else {
      warn.push(`driver ${text} is not among the drivers documented for ${env.runtime}`);
    }
  }
  if (fail.length) return { status: "no", why: fail.concat(warn).join("; ") };
  if (warn.length) return { status: "warn", why: warn.join("; ") };
  return null;
}

const SYMBOL = { runs: "\u2713", warn: "!", no: "\u2715" };
const RANK = { runs: 0, warn: 1, no: 2 };

// One cell as the reader's driver (`text`, may be empty) leaves it: the page's verdict, made worse by the check.
function liveCell(sku, base, text) {
  let status = base.status, why = base.why;
  if (text && status !== "no") {
    const found = driverVerdict(base.env, sku, text);
    if (found) {
      if (RANK[found.status] > RANK[status]) status = found.status;
      why = found.why + " (" + base.why + ")";
    } else {
      why = base.why + `; driver ${text} satisfies it`;
    }
  }
  return { status, why };
}

function applyDrivers() {
  for (const section of $$(".family")) {
    const family = section.dataset.family;
    const input = $("input[data-driver]", section);
    const text = (state.drivers[family] || "").trim();
    if (input && input.value !== text && document.activeElement !== input) input.value = text;
    for (const row of $$("tbody tr", section)) {
      const sku = skus.get(row.dataset.sku);
      for (const td of $$("td.c", row)) {
        const { status, why } = liveCell(sku, sku.envs.find(e => e.env === td.dataset.env), text);
        td.dataset.status = status;
        td.dataset.why = why;
        td.title = why;
        td.setAttribute("aria-label", `${sku.name} on ${td.dataset.env}: ${status}. ${why}`);
        td.querySelector(".sym").textContent = SYMBOL[status];
        td.querySelector(".word").textContent = status;
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------ search

function applyFilter() {
  const terms = state.q.toLowerCase().split(/\s+/).filter(Boolean);
  if (search.value !== state.q && document.activeElement !== search) search.value = state.q;
  let shownSkus = 0, shownEnvs = new Set();
  for (const section of $$(".family")) {
    const rows = $$("tbody tr", section);
    const cols = $$("thead th[data-env]", section);
    // A term that names an environment or a package narrows the columns; any other narrows the rows.
    const colTerms = terms.filter(t => !rows.some(r => r.dataset.search.includes(t))
      && cols.some(c => c.dataset.search.includes(t)));
    const rowTerms = terms.filter(t => !colTerms.includes(t));
    const envOn = new Set(cols.filter(c => colTerms.every(t => c.dataset.search.includes(t))).map(c => c.dataset.env));
    let rowsOn = 0;
    for (const row of rows) {
      row.hidden = !rowTerms.every(t => row.dataset.search.includes(t)) || !envOn.size;
      if (!row.hidden) rowsOn++;
    }
    for (const cell of $$("[data-env]", section)) {
      if (envOn.has(cell.dataset.env)) cell.removeAttribute("data-off"); else cell.setAttribute("data-off", "");
    }
    section.hidden = rowsOn === 0;
    if (!section.hidden) {
      shownSkus += rowsOn;
      envOn.forEach(e => shownEnvs.add(e));
    }
  }
  for (const card of $$(".card")) card.hidden = terms.length > 0 && !shownEnvs.has(card.dataset.env);
  const count = document.getElementById("count");
  count.textContent = terms.length
    ? (shownSkus ? `${shownSkus} of ${data.skus.length} SKUs, ${shownEnvs.size} of ${Object.keys(data.envs).length} environments match` : "Nothing matches; press Escape to clear")
    : "";
  for (const section of $$(".family")) resetRoving(section);
}

// ------------------------------------------------------------------------------------------------ picker

// The SKU the page follows: the one picked (menu, SKU link, #sku=), else the first SKU the search leaves in the
// grid, else none: then the page asks the reader to pick or search instead of guessing one for them.
function followed() {
  if (state.sku) return skus.get(state.sku);
  if (!state.q.trim()) return null;
  const row = $$(".grid tbody tr[data-sku]").find(r => !r.hidden && !r.closest(".family").hidden);
  return row ? skus.get(row.dataset.sku) || null : null;
}

function pickNone() {
  select.value = "";
  delete document.body.dataset.sku;
  document.getElementById("pick-name").textContent = "no accelerator picked";
  document.getElementById("pick-meta").textContent = "Pick your accelerator above, or search for it.";
  document.querySelector("#result tbody").replaceChildren();
  for (const tr of $$(".grid tbody tr")) tr.classList.remove("picked");
  document.getElementById("start-sku").textContent = "your accelerator";
  document.getElementById("start-driver-label").hidden = true;
  document.getElementById("start-body").hidden = true;
  document.getElementById("start-none").hidden = true;
  document.getElementById("start-prompt").hidden = false;
}

function pick() {
  const sku = followed();
  if (!sku) { pickNone(); return; }
  document.getElementById("start-prompt").hidden = true;
  select.value = sku.id;
  document.body.dataset.sku = sku.id;
  document.getElementById("pick-name").textContent = sku.name;
  document.getElementById("pick-meta").textContent = [sku.arch, sku.pci.join(", "), sku.driver_min ? `needs driver >= ${sku.driver_min}` : "", sku.ray ? `Ray: ${[...new Set(Object.values(sku.ray))].join(" / ")}` : ""].filter(Boolean).join(" \u00b7 ");
  const body = document.querySelector("#result tbody");
  body.replaceChildren();
  for (const row of sku.envs) {
    const live = document.querySelector(`tr[data-sku="${CSS.escape(sku.id)}"] td[data-env="${CSS.escape(row.env)}"]`);
    const status = live ? live.dataset.status : row.status;
    const tr = document.createElement("tr");
    const env = document.createElement("td");
    const link = document.createElement("a");
    link.href = "#env-" + row.env;
    link.textContent = row.env;
    env.append(link);
    const cell = document.createElement("td");
    cell.className = "c";
    cell.dataset.env = row.env;
    cell.dataset.status = status;
    cell.textContent = status === "no" ? "no" : status === "warn" ? "warn" : "yes";
    const why = document.createElement("td");
    why.textContent = live ? live.dataset.why : row.why;
    tr.append(env, cell, why);
    body.append(tr);
  }
  for (const tr of $$(".grid tbody tr")) tr.classList.toggle("picked", tr.dataset.sku === state.sku);
  renderStart(sku);
}

// ------------------------------------------------------------------------------------------------ get started

// The environments that run on `sku` with the reader's driver, best first, as `accelenv which` ranks them: the
// page works out the family's order among equals (data.start[family].prefer: default, then CI tier, then the
// matrix's order); here only the driver can change a status, and "runs" goes before "warn" (a stable sort).
function ranking(sku) {
  const text = (state.drivers[sku.family] || "").trim();
  const live = new Map(sku.envs.map(row => [row.env, liveCell(sku, row, text)]));
  const order = data.start[sku.family].prefer.filter(e => live.has(e) && live.get(e).status !== "no");
  order.sort((a, b) => RANK[live.get(a).status] - RANK[live.get(b).status]);
  return { live, order, text };
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function tierWords(tier) {
  return tier === "pr" ? "CI tests it on every pull request" : tier === "nightly" ? "CI tests it nightly" : "CI tests it before a release";
}

function whyChosen(sku, env, order, live) {
  const family = data.start[sku.family];
  const info = data.envs[env];
  const row = live.get(env);
  const how = row.status === "runs" ? "runs" : "runs with a caveat";
  if (env !== order[0]) return `An alternative to ${order[0]}: it ${how} on ${sku.name}: ${row.why}.`;
  if (info.default) return `Recommended: the ${family.name} default (nox -s ${family.session}), and it ${how} on ${sku.name}: ${row.why}.`;
  const fallback = family.prefer.find(e => data.envs[e].default);
  if (!fallback) return `Recommended: the best that ${how} on ${sku.name} (${tierWords(info.tier)}): ${row.why}.`;
  const theirs = live.get(fallback);
  if (theirs && theirs.status !== "no") {
    return `Recommended: the default, ${fallback}, only runs with a caveat here (${theirs.why}); ${env} runs without one (${tierWords(info.tier)}).`;
  }
  return `Recommended: the default, ${fallback}, does not run on ${sku.name} (${theirs ? theirs.why : "not listed"}); ${env} is the best that does: it ${how} and ${tierWords(info.tier)}.`;
}

function copyButton(code, label) {
  const button = el("button", "copy", "Copy");
  button.type = "button";
  button.setAttribute("aria-label", "Copy: " + label);
  button.addEventListener("click", () => copy(button, code));
  return button;
}

// Copy a command. navigator.clipboard needs a secure context and the reader's permission, which a page opened
// from a file may not get; the fallback selects the text and asks the browser to copy the selection, and if
// even that is refused the text stays selected for Ctrl+C.
async function copy(button, code) {
  const text = code.textContent;
  let how = "";
  try {
    if (navigator.clipboard && navigator.clipboard.writeText) {
      await Promise.race([
        navigator.clipboard.writeText(text),
        new Promise((_, reject) => setTimeout(() => reject(new Error("no answer")), 1000)),
      ]);
      how = "clipboard";
    }
  } catch (e) { how = ""; }
  if (!how) {
    const range = document.createRange();
    range.selectNodeContents(code);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    let done = false;
    try { done = document.execCommand("copy"); } catch (e) { done = false; }
    how = done ? "selection" : "selected";
  }
  button.dataset.copied = how;
  button.textContent = how === "selected" ? "Press Ctrl+C" : "Copied";
  document.getElementById("copy-status").textContent = how === "selected"
    ? "Selected; press Ctrl+C to copy" : "Copied to the clipboard";
  clearTimeout(button.reset);
  button.reset = setTimeout(() => { button.textContent = "Copy"; delete button.dataset.copied; }, 2000);
}

function renderNone(sku, text) {
  const box = document.getElementById("start-none");
  box.replaceChildren();
  const family = data.start[sku.family];
  const runnable = sku.recommended;
  const head = el("p", "none-head");
  if (!sku.envs.length) {
    head.textContent = `No ${family.name} environment exists yet, so nothing runs on ${sku.name}: add one to matrix.toml.`;
    box.append(head);
    return;
  }
  const reasons = el("ul", "none-why");
  if (!runnable.length || !text) {
    head.textContent = `No environment runs on ${sku.name} yet. Each one's reason:`;
    for (const row of sku.envs) {
      const item = el("li");
      item.append(el("code", "", row.env), ": " + row.why);
      reasons.append(item);
    }
  } else {
    const found = parts(text);
    // The lowest driver that runs one of them; among equals, the one ranked first.
    const needs = runnable.map(env => sku.envs.find(r => r.env === env)).filter(r => r.floor)
      .map(r => ({ env: r.env, floor: r.compat_floor || r.floor, full: r.compat_floor ? r.floor : null }))
      .filter(r => found && compare(found, parts(r.floor)) < 0)
      .sort((a, b) => compare(parts(a.floor), parts(b.floor)));
    if (needs.length) {
      const best = needs[0];
      head.append(`Driver ${text} is too old for every environment that runs on ${sku.name}. Update it: `);
      head.append(el("strong", "", `needs driver >= ${best.floor}`));
      head.append(` (for ${best.env}` + (best.full ? `, >= ${best.full} without compatibility mode)` : ")") + ".");
    } else {
      head.textContent = `No environment that runs on ${sku.name} accepts driver ${text}:`;
    }
    for (const env of runnable) {
      const item = el("li");
      item.append(el("code", "", env), ": " + liveCell(sku, sku.envs.find(r => r.env === env), text).why);
      reasons.append(item);
    }
  }
  box.append(head, reasons);
}

function renderStart(sku) {
  const family = data.start[sku.family];
  document.getElementById("start-sku").textContent = sku.name;
  const label = document.getElementById("start-driver-label");
  const input = document.getElementById("start-driver");
  label.hidden = !family.driver;
  document.getElementById("start-driver-name").textContent = `Your ${family.name} driver`;
  const value = state.drivers[sku.family] || "";
  if (input.value.trim() !== value && document.activeElement !== input) input.value = value;
  const familyBox = $(`input[data-driver="${CSS.escape(sku.family)}"]`);
  input.placeholder = familyBox ? familyBox.placeholder + " (optional)" : "optional";
  const { live, order, text } = ranking(sku);
  const body = document.getElementById("start-body");
  const none = document.getElementById("start-none");
  body.hidden = !order.length;
  none.hidden = !!order.length;
  if (!order.length) { renderNone(sku, text); return; }
  const chosen = order.includes(state.env) ? state.env : order[0];
  const list = document.getElementById("start-envs");
  list.replaceChildren();
  for (const env of order) {
    const info = data.envs[env];
    const row = live.get(env);
    const button = el("button", "env-choice");
    button.type = "button";
    button.dataset.env = env;
    button.dataset.status = row.status;
    button.setAttribute("aria-pressed", String(env === chosen));
    button.title = row.why;
    const top = el("span", "choice-top");
    top.append(el("code", "", env));
    if (env === order[0]) top.append(el("span", "badge recommended", "recommended"));
    if (info.default) top.append(el("span", "badge default", "\u2605 default"));
    const status = el("span", "c pill");
    status.dataset.status = row.status;
    status.append(el("span", "sym", SYMBOL[row.status]), el("span", "word", row.status));
    const meta = el("span", "meta", `${info.runtime} \u00b7 py${info.python} \u00b7 ${info.tier}` + (info.lock ? ` \u00b7 ${info.lock}` : ""));
    button.append(top, meta, status);
    button.addEventListener("click", () => {
      state.env = env === order[0] ? null : env;
      writeHash();
      renderStart(sku);
      const again = $(`#start-envs button[data-env="${CSS.escape(env)}"]`);
      if (again) again.focus();
    });
    list.append(button);
  }
  document.getElementById("start-env").textContent = chosen;
  document.getElementById("start-why").textContent = whyChosen(sku, chosen, order, live);
  const steps = document.getElementById("start-steps");
  steps.replaceChildren();
  for (const step of data.envs[chosen].steps) {
    const item = el("li", "step");
    const head = el("p", "step-label", step.label);
    if (step.note) head.append(" ", el("span", "muted", "(" + step.note + ")"));
    // A step that would fail now is not offered to copy: it says why, and offers the step that makes it work.
    const unavailable = step.available === false;
    if (unavailable) {
      item.classList.add("unavailable");
      item.dataset.available = "false";
      head.append(" ", el("span", "badge unavailable", "not available now"));
      item.append(head, el("p", "step-why", step.why + (step.fix ? "; first:" : "")));
      if (!step.fix) { steps.append(item); continue; }
    }
    const box = el("div", "code");
    const pre = el("pre");
    const code = el("code");
    (unavailable ? step.fix : step.text).split("\n").forEach((line, i) => {
      if (i) code.append(el("span", "nl", "\n"));  // textContent keeps the line break; the spans show it
      code.append(el("span", "line", line));
    });
    pre.append(code);
    box.append(pre, copyButton(code, unavailable ? step.fix : step.label));
    if (unavailable) item.append(box); else item.append(head, box);
    steps.append(item);
  }
}

// ------------------------------------------------------------------------------------------------ grid keys

function visibleCells(row) { return $$("td.c:not([data-off])", row); }
function visibleRows(section) { return $$("tbody tr", section).filter(r => !r.hidden); }

function resetRoving(section) {
  const cells = $$("td.c", section);
  cells.forEach(c => { c.tabIndex = -1; });
  const first = visibleRows(section).map(visibleCells).find(c => c.length);
  if (first) first[0].tabIndex = 0;
}

function explain(td) {
  const section = td.closest(".family");
  const row = td.closest("tr");
  const sku = skus.get(row.dataset.sku);
  const line = document.getElementById("why-" + section.dataset.family);
  line.replaceChildren();
  const head = document.createElement("b");
  head.textContent = `${sku.name} on ${td.dataset.env}: ${td.dataset.status}.`;
  line.append(head, " " + td.dataset.why);
}

function moveFocus(td, key) {
  const section = td.closest(".family");
  const rows = visibleRows(section);
  const r = rows.indexOf(td.closest("tr"));
  const cols = visibleCells(rows[r]);
  const c = cols.indexOf(td);
  let target = null;
  if (key === "ArrowRight") target = cols[c + 1];
  else if (key === "ArrowLeft") target = cols[c - 1];
  else if (key === "ArrowDown" && rows[r + 1]) target = visibleCells(rows[r + 1])[c];
  else if (key === "ArrowUp" && rows[r - 1]) target = visibleCells(rows[r - 1])[c];
  else if (key === "Home") target = cols[0];
  else if (key === "End") target = cols[cols.length - 1];
  if (!target) return false;
  td.tabIndex = -1;
  target.tabIndex = 0;
  target.focus();
  return true;
}

function choose(td) {
  if (state.sku !== td.closest("tr").dataset.sku) state.env = null;
  state.sku = td.closest("tr").dataset.sku;
  writeHash();
  pick();
  explain(td);
}

for (const section of $$(".family")) {
  section.addEventListener("keydown", event => {
    const td = event.target.closest("td.c");
    if (!td) return;
    if (["ArrowRight", "ArrowLeft", "ArrowDown", "ArrowUp", "Home", "End"].includes(event.key)) {
      if (moveFocus(td, event.key)) event.preventDefault();
    } else if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      choose(td);
    }
  });
  section.addEventListener("focusin", event => { const td = event.target.closest("td.c"); if (td) explain(td); });
  section.addEventListener("mouseover", event => { const td = event.target.closest("td.c"); if (td) explain(td); });
  section.addEventListener("click", event => {
    const td = event.target.closest("td.c");
    if (td) {
      $$("td.c", section).forEach(c => { c.tabIndex = -1; });
      td.tabIndex = 0;
      td.focus();
      choose(td);
    }
  });
  const input = $("input[data-driver]", section);
  if (input) {
    input.addEventListener("input", () => {
      state.drivers[section.dataset.family] = input.value.trim();
      writeHash();
      applyDrivers();
      pick();
    });
  }
}

// ------------------------------------------------------------------------------------------------ wiring

search.addEventListener("input", () => { state.q = search.value; writeHash(); applyFilter(); pick(); });
search.addEventListener("keydown", event => {
  if (event.key === "Escape") { search.value = ""; state.q = ""; writeHash(); applyFilter(); pick(); }
});
select.addEventListener("change", () => { state.sku = select.value || null; state.env = null; writeHash(); pick(); });
const startDriver = document.getElementById("start-driver");
startDriver.addEventListener("input", () => {
  const sku = skus.get(select.value);
  if (!sku) return;
  state.drivers[sku.family] = startDriver.value.trim();
  writeHash();
  applyDrivers();
  pick();
});
document.getElementById("start").hidden = false;
document.addEventListener("keydown", event => {
  const typing = /^(INPUT|SELECT|TEXTAREA)$/.test((event.target.tagName || ""));
  if (event.key === "/" && !typing) { event.preventDefault(); search.focus(); search.select(); }
});
// In-page links (the section nav, SKU, environment and source links) scroll to their target and keep the page's
// state in the fragment instead of replacing it; a SKU link also picks that SKU.
document.addEventListener("click", event => {
  const link = event.target.closest && event.target.closest('a[href^="#"]');
  if (!link || event.defaultPrevented || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) return;
  const id = decodeURIComponent(link.getAttribute("href").slice(1));
  const target = id && !id.includes("=") ? document.getElementById(id) : null;
  if (!target) return;
  event.preventDefault();
  if (id.startsWith("sku-") && skus.has(id.slice(4))) {
    if (state.sku !== id.slice(4)) state.env = null;
    state.sku = id.slice(4);
    writeHash();
    pick();
  }
  target.scrollIntoView();
  if (!target.matches("a, button, input, select, textarea, [tabindex]")) target.tabIndex = -1;
  target.focus({ preventScroll: true });
});
function render() { readHash(); applyDrivers(); applyFilter(); pick(); }
window.addEventListener("hashchange", render);
render();
