//! The self-contained HTML report: inline CSS, inline SVG, no scripts, no external resources.
//! It is also well-formed XML (self-closed void elements), which the tests check.

use std::fmt::Write as _;

use crate::figures::{self, Figure};
use crate::model::RunReport;
use crate::tables::{self, Table};
use crate::text::xml;

const STYLE: &str = "body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1060px;margin:2em auto;\
padding:0 1em;color:#222;line-height:1.45}\n\
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd}\n\
table{border-collapse:collapse;margin:.8em 0;font-size:14px}\n\
th,td{border:1px solid #ccc;padding:3px 8px;vertical-align:top}\n\
th{background:#f3f3f3;text-align:left}\n\
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\n\
figure{margin:1.5em 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}\n\
figcaption{font-size:13px;color:#555;max-width:640px}\n\
.warn{background:#fff4e5;border:1px solid #f0b96b;padding:.3em 1em}\n\
pre{background:#f7f7f7;padding:1em;overflow:auto;font-size:13px}\n\
footer{margin-top:3em;font-size:12px;color:#777}\n";

fn table(out: &mut String, t: &Table) {
    out.push_str("<table>\n<thead><tr>");
    for h in &t.header {
        let _ = write!(out, "<th>{}</th>", xml(h));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in &t.rows {
        out.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            if i < t.text_columns {
                let _ = write!(out, "<td>{}</td>", xml(cell));
            } else {
                let _ = write!(out, "<td class=\"n\">{}</td>", xml(cell));
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
}

fn figure(out: &mut String, f: &Figure) {
    let _ = write!(
        out,
        "<figure id=\"fig-{}\">\n{}<figcaption>{}</figcaption>\n</figure>\n",
        xml(&f.id),
        f.svg,
        xml(&f.caption)
    );
}

/// The whole report as one HTML file.
pub fn render_html(r: &RunReport) -> String {
    let figs = figures::figures(r);
    let fig = |id: &str| figs.iter().find(|f| f.id == id);
    let title = if r.title.trim().is_empty() { "ProD run report" } else { r.title.as_str() };
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n\
         <title>{t}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n<h1>{t}</h1>\n",
        t = xml(title)
    );
    let meta = tables::meta(r);
    if !meta.is_empty() {
        out.push_str("<table>\n<tbody>\n");
        for (k, v) in &meta {
            let _ = writeln!(out, "<tr><th>{}</th><td>{}</td></tr>", xml(k), xml(v));
        }
        out.push_str("</tbody>\n</table>\n");
    }
    let warnings = tables::warnings(r);
    if !warnings.is_empty() {
        out.push_str("<div class=\"warn\">\n<p><strong>Data warnings</strong> (values in the run file that cannot be right as given):</p>\n<ul>\n");
        for w in &warnings {
            let _ = writeln!(out, "<li>{}</li>", xml(w));
        }
        out.push_str("</ul>\n</div>\n");
    }

    out.push_str("<h2 id=\"evaluations\">Evaluations</h2>\n");
    if r.evaluations.is_empty() {
        out.push_str("<p>No evaluations in this run.</p>\n");
    } else {
        table(&mut out, &tables::evaluations(r));
        out.push_str(
            "<p>pass@k: unbiased estimator from n samples per theorem, in parentheses the bootstrap 95% confidence \
             interval (percentage points). Theorems whose samples were lost to infrastructure failures are left out \
             (\u{201c}judged\u{201d}), never counted as failures.</p>\n",
        );
        if let Some(f) = fig("pass-at-k") {
            figure(&mut out, f);
        }
    }

    let with_depth: Vec<_> = r.evaluations.iter().filter(|e| !e.depth_table.is_empty()).collect();
    if !with_depth.is_empty() {
        out.push_str("<h2 id=\"depth\">Proved theorems by proof depth</h2>\n");
        if let Some(f) = fig("depth") {
            figure(&mut out, f);
        }
        for e in with_depth {
            let _ = writeln!(out, "<h3>{}</h3>", xml(&e.name));
            table(&mut out, &tables::depth(e));
        }
    }

    let sweeps = tables::temperature_sweeps(r);
    if !sweeps.is_empty() {
        out.push_str("<h2 id=\"temperature\">Temperature sweep</h2>\n");
        for (i, g) in sweeps.iter().enumerate() {
            let _ =
                writeln!(out, "<h3>{} ({}, n = {})</h3>", xml(&g[0].name), xml(&g[0].split), g[0].samples_per_theorem);
            table(&mut out, &tables::sweep(g));
            if let Some(f) = fig(&format!("temperature-{}", i + 1)) {
                figure(&mut out, f);
            }
        }
    }

    out.push_str("<h2 id=\"rounds\">RL rounds</h2>\n");
    if r.rounds.is_empty() {
        out.push_str("<p>No RL rounds in this run.</p>\n");
    } else {
        table(&mut out, &tables::rounds(r));
        for f in figs.iter().filter(|f| f.id.starts_with("rounds-")) {
            figure(&mut out, f);
        }
    }

    if !r.notes.is_empty() {
        out.push_str("<h2 id=\"notes\">Notes</h2>\n<ul>\n");
        for n in &r.notes {
            let _ = writeln!(out, "<li>{}</li>", xml(n));
        }
        out.push_str("</ul>\n");
    }
    if !r.config.is_null() {
        let json = serde_json::to_string_pretty(&r.config).unwrap_or_default();
        let _ = writeln!(
            out,
            "<h2 id=\"config\">Configuration</h2>\n<details><summary>Configuration as loaded</summary>\n<pre>{}</pre>\n</details>",
            xml(&json)
        );
    }
    out.push_str("<footer>Written by <code>prod report</code>.</footer>\n</body>\n</html>\n");
    out
}
