// The live page: draws what /ws sends (see aiko/drivers/live.py). No libraries.
"use strict";
const S = { exp: [], model: [], steer: [], status: null, start: null, end: null,
            comparison: null, fault: null, records: 0, frames: 0 };
window.aikoLive = S;
const $ = (id) => document.getElementById(id);
const BLUE = "#1f4e9c", RED = "#c8102e", GREEN = "#2a7f3f", GREY = "#999";
let dirty = true;

function setState(state, text) {
  document.body.dataset.state = state;
  $("state").textContent = state;
  if (text !== undefined) $("banner").textContent = text;
}

function take(rec) {
  S.records++;
  switch (rec.k) {
    case "exp": S.exp.push(rec); break;
    case "model": S.model.push(rec); break;
    case "steer": S.steer.push(rec); break;
    case "status": S.status = rec; break;
    case "fault": S.fault = rec; break;
    case "start":
      S.start = rec;
      $("title").textContent = "aiko live: " + (rec.title || rec.gait || "");
      if (rec.steering === "path") $("legend-path").hidden = false;
      $("steer-title").textContent = rec.steering
        ? "heading of travel and its target [deg], offset [deg]" : "heading [deg] (no steering)";
      if (document.body.dataset.state !== "running") setState("running");
      break;
    case "end":
      S.end = rec;
      setState(rec.reason === "completed" ? "completed" : rec.reason,
               rec.reason === "completed" ? "The trial has ended: completed."
               : "The trial has ended: " + rec.reason + (rec.fault ? " (" + rec.fault + ")" : ""));
      break;
    case "comparison": S.comparison = rec; break;
    case "closed": break;
  }
  dirty = true;
}

function connect() {
  const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") +
                           location.host + "/ws");
  ws.onopen = () => { if (!S.end) setState(S.start ? "running" : "waiting", ""); };
  ws.onmessage = (ev) => { for (const rec of JSON.parse(ev.data)) take(rec); };
  ws.onclose = () => {
    if (!S.end) setState("disconnected",
                         "The connection to the trial was lost; what was received is shown.");
    dirty = true;
  };
}

function bounds(series, keyx, keyy) {
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  for (const s of series) for (const p of s) {
    const x = p[keyx], y = p[keyy];
    if (x == null || y == null) continue;
    if (x < x0) x0 = x; if (x > x1) x1 = x; if (y < y0) y0 = y; if (y > y1) y1 = y;
  }
  return x0 <= x1 ? [x0, x1, y0, y1] : null;
}

function axes(ctx, w, h, m, b, xlabel, ylabel) {
  ctx.clearRect(0, 0, w, h);
  ctx.strokeStyle = "#ccc"; ctx.lineWidth = 1; ctx.fillStyle = "#555";
  ctx.font = "11px sans-serif";
  const ticks = (lo, hi) => {
    const span = hi - lo || 1, step = Math.pow(10, Math.floor(Math.log10(span / 4)));
    const k = span / step > 20 ? 5 : span / step > 8 ? 2 : 1;
    const out = [];
    for (let v = Math.ceil(lo / (k * step)) * k * step; v <= hi + 1e-12; v += k * step) out.push(v);
    return out;
  };
  const X = (x) => m.l + (x - b[0]) / (b[1] - b[0]) * (w - m.l - m.r);
  const Y = (y) => h - m.b - (y - b[2]) / (b[3] - b[2]) * (h - m.t - m.b);
  for (const v of ticks(b[0], b[1])) {
    ctx.beginPath(); ctx.moveTo(X(v), m.t); ctx.lineTo(X(v), h - m.b); ctx.stroke();
    ctx.fillText(+v.toFixed(3), X(v) - 8, h - m.b + 13);
  }
  for (const v of ticks(b[2], b[3])) {
    ctx.beginPath(); ctx.moveTo(m.l, Y(v)); ctx.lineTo(w - m.r, Y(v)); ctx.stroke();
    ctx.fillText(+v.toFixed(3), 2, Y(v) + 4);
  }
  ctx.fillText(xlabel, w - m.r - 40, h - 2);
  if (ylabel) ctx.fillText(ylabel, m.l + 4, m.t + 10);
  return [X, Y];
}

function line(ctx, pts, X, Y, kx, ky, color, width, dash) {
  ctx.strokeStyle = color; ctx.lineWidth = width; ctx.setLineDash(dash || []);
  ctx.beginPath();
  let pen = false;
  for (const p of pts) {
    const x = p[kx], y = p[ky];
    if (x == null || y == null) { pen = false; continue; }
    if (pen) ctx.lineTo(X(x), Y(y)); else { ctx.moveTo(X(x), Y(y)); pen = true; }
  }
  ctx.stroke(); ctx.setLineDash([]);
}

function drawPath() {
  const c = $("path"), ctx = c.getContext("2d"), w = c.width, h = c.height;
  const wp = S.start && S.start.waypoints ? S.start.waypoints.map((p) => ({ x: p[0], y: p[1] })) : [];
  let b = bounds([S.exp, S.model, wp], "x", "y") || [-0.5, 0.5, -0.5, 0.5];
  const m = { l: 42, r: 10, t: 10, b: 22 };
  // equal scales on both axes, at least 0.5 m across
  let sx = Math.max(b[1] - b[0], 0.5), sy = Math.max(b[3] - b[2], 0.5);
  const ax = (w - m.l - m.r) / sx, ay = (h - m.t - m.b) / sy, s = Math.min(ax, ay) / 1.1;
  const cx = (b[0] + b[1]) / 2, cy = (b[2] + b[3]) / 2;
  const hx = (w - m.l - m.r) / s / 2, hy = (h - m.t - m.b) / s / 2;
  b = [cx - hx, cx + hx, cy - hy, cy + hy];
  const [X, Y] = axes(ctx, w, h, m, b, "x [m]", "y [m]");
  drawScene(ctx, X, Y, s, b);
  if (wp.length) line(ctx, wp, X, Y, "x", "y", GREEN, 1.5, [6, 4]);
  line(ctx, S.model, X, Y, "x", "y", RED, 1.6, [5, 3]);
  line(ctx, S.exp, X, Y, "x", "y", BLUE, 2);
  for (const [pts, col] of [[S.exp, BLUE], [S.model, RED]]) {
    if (!pts.length) continue;
    const p = pts[pts.length - 1];
    ctx.fillStyle = col; ctx.beginPath(); ctx.arc(X(p.x), Y(p.y), 4, 0, 2 * Math.PI); ctx.fill();
  }
}

// the scene's steps (a band from each edge, darker as the floor rises) and
// pegs (olive discs to scale), those in view
function drawScene(ctx, X, Y, s, b) {
  const st = S.start || {}, steps = st.steps || [], pegs = st.pegs || [];
  steps.forEach(([x0, level], k) => {
    if (x0 > b[1]) return;
    const x1 = k + 1 < steps.length ? Math.min(steps[k + 1][0], b[1]) : b[1];
    ctx.fillStyle = "rgba(176, 137, 104, " + Math.min(0.12 + 0.08 * k, 0.4) + ")";
    ctx.fillRect(X(Math.max(x0, b[0])), Y(b[3]), X(x1) - X(Math.max(x0, b[0])), Y(b[2]) - Y(b[3]));
    ctx.strokeStyle = "#7f5539"; ctx.lineWidth = 1.2;
    ctx.beginPath(); ctx.moveTo(X(x0), Y(b[2])); ctx.lineTo(X(x0), Y(b[3])); ctx.stroke();
    ctx.fillStyle = "#7f5539"; ctx.fillText("+" + Math.round(level * 1000) / 10 + " cm", X(x0) + 3, Y(b[3]) + 12);
  });
  ctx.fillStyle = "#6b8e23";
  for (const [x, y, r] of pegs) {
    if (x + r < b[0] || x - r > b[1] || y + r < b[2] || y - r > b[3]) continue;
    ctx.beginPath(); ctx.arc(X(x), Y(y), Math.max(r * s, 2), 0, 2 * Math.PI); ctx.fill();
  }
}

function drawXY() {
  const c = $("xy"), ctx = c.getContext("2d"), w = c.width, h = c.height;
  const tb = bounds([S.exp, S.model], "t", "x"), yb = bounds([S.exp, S.model], "t", "y");
  if (!tb) { axes(ctx, w, h, { l: 42, r: 10, t: 10, b: 22 }, [0, 1, 0, 1], "t [s]"); return; }
  const lo = Math.min(tb[2], yb[2]), hi = Math.max(tb[3], yb[3]);
  const pad = Math.max(0.05, 0.05 * (hi - lo));
  const [X, Y] = axes(ctx, w, h, { l: 42, r: 10, t: 10, b: 22 },
                      [tb[0], Math.max(tb[1], tb[0] + 1), lo - pad, hi + pad], "t [s]",
                      "x solid, y thin");
  line(ctx, S.model, X, Y, "t", "x", RED, 1.6, [5, 3]);
  line(ctx, S.exp, X, Y, "t", "x", BLUE, 2);
  line(ctx, S.model, X, Y, "t", "y", RED, 1, [5, 3]);
  line(ctx, S.exp, X, Y, "t", "y", BLUE, 1);
}

const DEG = 180 / Math.PI;
function drawHeading() {
  const c = $("heading"), ctx = c.getContext("2d"), w = c.width, h = c.height;
  const pts = S.steer.map((r) => ({ t: r.t, h: r.heading == null ? null : r.heading * DEG,
                                    g: r.target == null ? null : r.target * DEG,
                                    o: r.offset * DEG }));
  const b = bounds([pts.map((p) => ({ t: p.t, v: p.h })), pts.map((p) => ({ t: p.t, v: p.g })),
                    pts.map((p) => ({ t: p.t, v: p.o }))], "t", "v");
  if (!b) { axes(ctx, w, h, { l: 42, r: 10, t: 10, b: 22 }, [0, 1, -30, 30], "t [s]"); return; }
  const [X, Y] = axes(ctx, w, h, { l: 42, r: 10, t: 10, b: 22 },
                      [b[0], Math.max(b[1], b[0] + 1), b[2] - 5, b[3] + 5], "t [s]",
                      "blue: heading, red: target, green: offset");
  line(ctx, pts, X, Y, "t", "g", RED, 1.5, [4, 3]);
  line(ctx, pts, X, Y, "t", "o", GREEN, 1.2);
  line(ctx, pts, X, Y, "t", "h", BLUE, 2);
}

function text() {
  const st = S.status;
  if (st) {
    $("status").textContent = `t ${(+st.t).toFixed(1)} s, phase ${st.phase}, periods ${st.periods}` +
      `, late ${st.late}, missed ${st.missed}, nodes ok ${st.nodes_ok}/${st.nodes}` +
      (st.model_lag != null ? `, model lag ${(+st.model_lag).toFixed(2)} s` : "") +
      (S.fault ? `, fault: ${S.fault.reason}` : "");
  }
  const rows = [];
  const last = (a) => a.length ? a[a.length - 1] : null;
  const e = last(S.exp), mo = last(S.model), sr = last(S.steer);
  if (e) rows.push(`link 6 (motion capture): (${e.x.toFixed(3)}, ${e.y.toFixed(3)}) m, ${S.exp.length} samples`);
  if (mo) rows.push(`link 6 (model): (${mo.x.toFixed(3)}, ${mo.y.toFixed(3)}) m, ${S.model.length} samples`);
  if (sr) rows.push(`steering ${sr.mode}: offset ${(sr.offset * DEG).toFixed(1)} deg` +
    (sr.heading != null ? `, heading ${(sr.heading * DEG).toFixed(1)} deg` : "") +
    (sr.target != null ? `, target ${(sr.target * DEG).toFixed(1)} deg` : "") +
    (sr.e != null ? `, cross-track ${(100 * sr.e).toFixed(1)} cm` : ""));
  const cm = S.comparison;
  if (cm && cm.final_error_m != null) rows.push(`comparison: final error ${(100 * cm.final_error_m).toFixed(1)} cm, ` +
    `RMS ${(100 * cm.rms_error_m).toFixed(1)} cm, distance ratio ${(+cm.distance_ratio).toFixed(2)}`);
  $("numbers").innerHTML = rows.map((r) => `<div>${r}</div>`).join("") || "-";
  document.body.dataset.expPoints = S.exp.length;
  document.body.dataset.modelPoints = S.model.length;
}

function frame() {
  if (dirty) {
    dirty = false;
    drawPath(); drawXY(); drawHeading(); text();
    S.frames++;
  }
  requestAnimationFrame(frame);
}

connect();
requestAnimationFrame(frame);
