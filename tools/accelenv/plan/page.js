"use strict";
// The page reads and prints without this script; it adds search, the SKU picker, the driver check, keyboard
// movement through the grids and state in the URL fragment (#sku=b300&q=h100&driver-nvidia=550.54.15).
const data = JSON.parse(document.getElementById("data").textContent);
const $ = (selector, root = document) => root.querySelector(selector);
const $$ = (selector, root = document) => Array.from(root.querySelectorAll(selector));
const search = document.getElementById("q");
const select = document.getElementById("sku");
const skus = new Map(data.skus.map(s => [s.id, s]));
const state = { q: "", sku: null, drivers: {} };

// ------------------------------------------------------------------------------------------------ URL state

function readHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  state.q = params.get("q") || "";
  state.sku = skus.has(params.get("sku")) ? params.get("sku") : null;
  state.drivers = {};
  for (const family of data.families) {
    const value = params.get("driver-" + family);
    if (value) state.drivers[family] = value;
  }
}

function writeHash() {
  const params = new URLSearchParams();
  if (state.sku) params.set("sku", state.sku);
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

function applyDrivers() {
  for (const section of $$(".family")) {
    const family = section.dataset.family;
    const input = $("input[data-driver]", section);
    const text = (state.drivers[family] || "").trim();
    if (input && input.value !== text && document.activeElement !== input) input.value = text;
    for (const row of $$("tbody tr", section)) {
      const sku = skus.get(row.dataset.sku);
      for (const td of $$("td.c", row)) {
        const base = sku.envs.find(e => e.env === td.dataset.env);
        let status = base.status, why = base.why;
        if (text && status !== "no") {
          const found = driverVerdict(td.dataset.env, sku, text);
          if (found) {
            if (RANK[found.status] > RANK[status]) status = found.status;
            why = found.why + " (" + base.why + ")";
          } else {
            why = base.why + `; driver ${text} satisfies it`;
          }
        }
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

function pick(id) {
  const sku = skus.get(id) || data.skus[0];
  select.value = sku.id;
  document.body.dataset.sku = sku.id;
  document.getElementById("pick-name").textContent = sku.name;
  document.getElementById("pick-meta").textContent = [sku.arch, sku.pci.join(", "), sku.driver_min ? `needs driver >= ${sku.driver_min}` : ""].filter(Boolean).join(" \u00b7 ");
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
  state.sku = td.closest("tr").dataset.sku;
  writeHash();
  pick(state.sku);
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
      pick(state.sku);
    });
  }
}

// ------------------------------------------------------------------------------------------------ wiring

search.addEventListener("input", () => { state.q = search.value; writeHash(); applyFilter(); });
search.addEventListener("keydown", event => {
  if (event.key === "Escape") { search.value = ""; state.q = ""; writeHash(); applyFilter(); }
});
select.addEventListener("change", () => { state.sku = select.value; writeHash(); pick(state.sku); });
document.addEventListener("keydown", event => {
  const typing = /^(INPUT|SELECT|TEXTAREA)$/.test((event.target.tagName || ""));
  if (event.key === "/" && !typing) { event.preventDefault(); search.focus(); search.select(); }
});
function render() { readHash(); applyDrivers(); applyFilter(); pick(state.sku); }
window.addEventListener("hashchange", render);
render();
