"""The HTML report's style sheet, inline in every report: no external font,
image or stylesheet, so a report opens offline, survives being mailed, and prints.
Colours are the Okabe-Ito palette of report/svg.py, readable with colour blindness."""

CSS = """
:root{--ink:#1f1f1f;--muted:#5f6368;--line:#e3e5e8;--panel:#f6f7f9;--accent:#0072B2;
--fail:#C2410C;--warn:#E69F00;--ok:#00785A;--skip:#7a7a7a}
*{box-sizing:border-box}
body{margin:0;background:#fff;color:var(--ink);
font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
-webkit-print-color-adjust:exact;print-color-adjust:exact}
main{max-width:1240px;margin:0 auto;padding:28px 32px 40px}
h1{font-size:24px;font-weight:650;margin:0 0 2px;letter-spacing:-.01em}
h1 .host{color:var(--accent)}
h2{font-size:17px;font-weight:650;margin:34px 0 12px;padding-bottom:6px;border-bottom:2px solid var(--line)}
h3{font-size:14px;margin:18px 0 6px}
a{color:var(--accent)}
.sub,.hint,.counts{color:var(--muted);margin:4px 0}
.strip{margin:6px 0 0}
ul.problems{list-style:none;padding:0;margin:4px 0 0}
ul.problems li{margin:3px 0} .more{color:var(--muted)}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:12.5px}
.banner{border-left:4px solid var(--warn);background:#fff7e0;padding:10px 14px;margin:16px 0 0}
.verdict{font-size:15px;background:var(--panel);border-left:4px solid var(--accent);padding:12px 16px;margin:0 0 14px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:10px}
.card{border:1px solid var(--line);border-radius:6px;padding:9px 12px;break-inside:avoid}
.card .label{color:var(--muted);font-size:12.5px}
.card .value{font-size:21px;font-weight:600;font-variant-numeric:tabular-nums;line-height:1.3}
.card .unit{font-size:13px;font-weight:400;color:var(--muted);margin-left:4px}
.card .eff{font-size:12px;color:var(--muted)}
.card .value.disturbed{color:var(--muted)} .card s{color:var(--muted)}
.meter{height:5px;background:#e6e8eb;border-radius:3px;overflow:hidden;margin:4px 0 2px}
.meter>span{display:block;height:100%;background:var(--accent)}
.bar{display:inline-block;height:6px;background:#e6e8eb;border-radius:3px;vertical-align:middle;overflow:hidden}
.bar>span{display:block;height:100%;background:var(--accent)}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:3px 20px;margin:0}
dl.facts dt{color:var(--muted)} dl.facts dd{margin:0}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{padding:5px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{font-size:12px;font-weight:600;color:var(--muted);border-bottom:2px solid var(--line);white-space:nowrap}
.n{text-align:right;white-space:nowrap}
td.eff{white-space:nowrap}
tr.outlier td{background:#fff4e5}
td.note{color:var(--muted);font-size:12px;min-width:260px}
tbody tr:nth-child(even){background:#fafbfc}
tr.invalid td{color:var(--fail)}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:16px}
figure{margin:0;border:1px solid var(--line);border-radius:6px;padding:12px 12px 10px;break-inside:avoid;
page-break-inside:avoid}
figure.wide{grid-column:1/-1}
figure svg{display:block;max-width:100%;height:auto;margin:0 auto}
figcaption{color:var(--muted);font-size:12px;margin-top:6px}
ul.missing{color:var(--muted);padding-left:20px;margin:12px 0 0}
.badge{display:inline-block;min-width:58px;text-align:center;padding:1px 7px;border-radius:9px;font-size:10.5px;
font-weight:700;letter-spacing:.05em;text-transform:uppercase;color:#fff;vertical-align:1px}
.badge.fail{background:var(--fail)} .badge.warn{background:var(--warn);color:#1f1f1f}
.badge.ok{background:var(--ok)} .badge.skipped{background:var(--skip)}
.finding{border:1px solid var(--line);border-left:4px solid var(--skip);border-radius:4px;padding:8px 14px;margin:8px 0;
break-inside:avoid}
.finding.fail{border-left-color:var(--fail)} .finding.warn{border-left-color:var(--warn)}
.finding.ok{border-left-color:var(--ok)}
.ftitle{font-weight:600} .fid{color:var(--muted);font-weight:400;margin-left:6px}
.root{font-size:11px;font-weight:600;color:var(--fail);border:1px solid var(--fail);border-radius:3px;padding:0 4px;
margin-left:6px}
.finding dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0 2px}
.finding dt{color:var(--muted)} .finding dd{margin:0}
footer{margin-top:36px;padding-top:10px;border-top:1px solid var(--line);color:var(--muted);font-size:12px}
@media (max-width:720px){main{padding:16px}.plots{grid-template-columns:1fr}}
@media print{@page{size:A4;margin:12mm}main{max-width:none;padding:0}body{font-size:10.5px}
h2{break-after:avoid}.plots{grid-template-columns:1fr}figure svg{max-height:120mm;width:auto}
.scroll{overflow:visible}td.note{min-width:0}a{color:inherit;text-decoration:none}}
"""
