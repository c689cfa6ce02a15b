"""The look of every judgegraph HTML report, and the check that it rendered."""

from __future__ import annotations

__all__ = ["RENDER_CHECK_JS", "REPORT_CSS"]

REPORT_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
header{background:#1d2430;color:#fff;padding:18px 28px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c5cbd6}main{padding:20px 28px;max-width:1400px}
.kpis{display:flex;flex-wrap:wrap;gap:10px;margin-bottom:18px}
.kpi{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:8px 14px;min-width:96px}
.kpi b{display:block;font-size:18px}.kpi span{color:#5b6576;font-size:12px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(440px,1fr));gap:16px}
figure{background:#fff;border:1px solid #dde1e7;border-radius:6px;margin:0;padding:10px}
figcaption{color:#5b6576;font-size:12px;margin-top:6px}.na{color:#8a93a3;font-style:italic;padding:30px 10px}
table{border-collapse:collapse;background:#fff;margin:8px 0 18px}td,th{border:1px solid #dde1e7;padding:4px 10px;
text-align:left}th{background:#eef1f5}h2{font-size:16px;margin:22px 0 8px}
tr.mark td{font-weight:600;background:#fff6f4}svg.plot{display:block;height:auto}
svg.plot *{stroke-linejoin:round;stroke-linecap:butt}
"""

# Runs when the page is opened: records that every plot was laid out with a
# size and has drawn shapes (matplotlib writes paths), so a headless browser
# can confirm the report rendered.
RENDER_CHECK_JS = """
window.addEventListener('load',function(){var s=document.querySelectorAll('svg.plot'),ok=0;
s.forEach(function(e){var b=e.getBoundingClientRect();
if(b.width>0&&b.height>0&&e.querySelectorAll('path,rect,circle,polyline,use').length>0)ok++;});
var el=document.getElementById('render-check');el.setAttribute('data-plots',String(s.length));
el.setAttribute('data-rendered',String(ok));el.textContent=ok+' of '+s.length+' plots rendered';});
"""
