//! The self-contained HTML report: inline CSS, inline SVG, no scripts, no external resources.
//! It is also well-formed XML (self-closed void elements), which the tests check.

use std::fmt::Write as _;

use crate::figures::{self, Figure};
use crate::model::{Evaluation, ExampleTree, RunReport};
use crate::outline::{outline, Block};
use crate::tables::{self, Table};
use crate::text::{fixed, xml};

const STYLE: &str = "body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1240px;margin:2em auto;\
padding:0 1em;color:#222;line-height:1.45}\n\
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd}\n\
table{border-collapse:collapse;margin:.8em 0;font-size:14px;display:block;max-width:100%;overflow-x:auto}\n\
th,td{border:1px solid #ccc;padding:3px 8px;vertical-align:top}\n\
th{background:#f3f3f3;text-align:left}\n\
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\n\
figure{margin:1.5em 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}\n\
figcaption{font-size:13px;color:#555;max-width:640px}\n\
.warn{background:#fff4e5;border:1px solid #f0b96b;padding:.3em 1em}\n\
.alarm{background:#fde8e8;border:2px solid #c0392b;padding:.3em 1em}\n\
pre{background:#f7f7f7;padding:1em;overflow:auto;font-size:13px;white-space:pre-wrap}\n\
details.tree{border:1px solid #ddd;padding:.3em 1em;margin:.6em 0}\n\
details.tree summary{cursor:pointer;font-weight:600}\n\
.node{border-left:4px solid #ccc;padding-left:.8em;margin:.8em 0}\n\
.node.proved{border-color:#43a047}.node.failed{border-color:#e53935}.node.rejected{border-color:#fb8c00}\n\
.node.timed_out{border-color:#8e24aa}.node.infra{border-color:#9e9e9e}\n\
.msg{color:#b71c1c;font-size:13px}\n\
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

/// The whole report as one HTML file: the head, the [`outline`]'s blocks, the footer.
pub fn render_html(r: &RunReport) -> String {
    let figs = figures::figures(r);
    let title = if r.title.trim().is_empty() {
        "ProD run report"
    } else {
        r.title.as_str()
    };
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n\
         <title>{t}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n<h1>{t}</h1>\n",
        t = xml(title)
    );
    for b in outline(r, &figs) {
        block(&mut out, &b);
    }
    out.push_str("<footer>Written by <code>prod report</code>.</footer>\n</body>\n</html>\n");
    out
}

/// One block of the outline in HTML.
fn block(out: &mut String, b: &Block<'_>) {
    match b {
        Block::Meta(meta) if !meta.is_empty() => {
            out.push_str("<table>\n<tbody>\n");
            for (k, v) in meta {
                let _ = writeln!(out, "<tr><th>{}</th><td>{}</td></tr>", xml(k), xml(v));
            }
            out.push_str("</tbody>\n</table>\n");
        }
        Block::Alarm(alarms) if !alarms.is_empty() => {
            out.push_str("<div class=\"alarm\">\n<p><strong>SOUNDNESS ALARM</strong>: the checker accepted a canary, a statement no proof may prove. The run stopped; no figure of this report can be trusted until the cause is found (the nodes are in <code>canary-alarm.jsonl</code>).</p>\n");
            list(out, alarms);
            out.push_str("</div>\n");
        }
        Block::Warnings(w) if !w.is_empty() => {
            out.push_str("<div class=\"warn\">\n<p><strong>Data warnings</strong> (values in the run file that cannot be right as given):</p>\n");
            list(out, w);
            out.push_str("</div>\n");
        }
        Block::Meta(_) | Block::Alarm(_) | Block::Warnings(_) => {}
        Block::Section { id, heading, .. } => {
            let _ = writeln!(out, "<h2 id=\"{}\">{}</h2>", xml(id), xml(heading));
        }
        Block::Versus {
            id,
            method,
            baseline,
        } => {
            let (id, m, b) = (xml(id), xml(method), xml(baseline));
            let _ = writeln!(out, "<h2 id=\"{id}\">{m} against {b}</h2>");
        }
        Block::Sub(h) => {
            let _ = writeln!(out, "<h3>{}</h3>", xml(h));
        }
        Block::SweepSub {
            name,
            split,
            samples,
        } => {
            let _ = writeln!(
                out,
                "<h3>{} ({}, n = {samples})</h3>",
                xml(name),
                xml(split)
            );
        }
        Block::Para(p) => {
            let _ = writeln!(out, "<p>{}</p>", xml(p));
        }
        Block::Note { html, .. } => out.push_str(html),
        Block::Table(t) => table(out, t),
        Block::EitherProved(t) => {
            let _ = writeln!(
                out,
                "<details class=\"tree\" open=\"open\">\n<summary>Theorems proved by either ({})</summary>",
                t.rows.len()
            );
            table(out, t);
            out.push_str("</details>\n");
        }
        Block::Figure(f) => figure(out, f),
        Block::Details(e) => details(out, e),
        Block::Notes(notes) => list(out, notes),
        Block::Config(json) => {
            let _ = writeln!(
                out,
                "<details><summary>Configuration as loaded</summary>\n<pre>{}</pre>\n</details>",
                xml(json)
            );
        }
    }
}

/// A bulleted list of escaped items.
fn list(out: &mut String, items: &[String]) {
    out.push_str("<ul>\n");
    for i in items {
        let _ = writeln!(out, "<li>{}</li>", xml(i));
    }
    out.push_str("</ul>\n");
}

/// Colour of a verdict class of [`NodeOutcomes::classes`](crate::model::NodeOutcomes::classes)
/// (node breakdown bar).
fn class_colour(class: &str) -> &'static str {
    match class {
        "proved" => "#43a047",
        "failed" => "#e53935",
        "rejected" => "#fb8c00",
        crate::model::CUT_LABEL => "#c0a000",
        "timed out" => "#8e24aa",
        _ => "#9e9e9e",
    }
}

/// One stacked bar of the node verdict kinds, with a tooltip per segment.
fn outcome_bar(out: &mut String, o: &crate::model::NodeOutcomes) {
    let classes = o.classes();
    let total: usize = classes
        .iter()
        .fold(0usize, |a, &(_, c)| a.saturating_add(c));
    if total == 0 {
        return;
    }
    let (w, h) = (600.0_f64, 22.0_f64);
    let _ = write!(
        out,
        "<figure>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\">\n"
    );
    let mut x = 0.0_f64;
    for &(name, n) in &classes {
        let colour = class_colour(name);
        if n == 0 {
            continue;
        }
        let width = w * n as f64 / total as f64;
        let _ = writeln!(
            out,
            "<rect x=\"{}\" y=\"0\" width=\"{}\" height=\"{h}\" fill=\"{colour}\"><title>{}: {n}</title></rect>",
            fixed(x, 2),
            fixed(width, 2),
            xml(name)
        );
        x += width;
    }
    out.push_str("</svg>\n<figcaption>");
    let legend: Vec<String> = classes
        .iter()
        .map(|&(name, n)| {
            format!(
                "<span style=\"color:{}\">\u{25a0}</span> {} {n}",
                class_colour(name),
                xml(name)
            )
        })
        .collect();
    out.push_str(&legend.join(" \u{b7} "));
    out.push_str("</figcaption>\n</figure>\n");
}

/// Per-evaluation details: headline measures, node breakdown, per-theorem table, example trees.
fn details(out: &mut String, e: &Evaluation) {
    let _ = writeln!(out, "<h3>{}</h3>", xml(&e.name));
    out.push_str("<table>\n<tbody>\n");
    for (k, v) in tables::measures(e) {
        let _ = writeln!(out, "<tr><th>{}</th><td>{}</td></tr>", xml(&k), xml(&v));
    }
    out.push_str("</tbody>\n</table>\n");
    if let Some(o) = &e.node_outcomes {
        out.push_str("<h4>Nodes by verdict</h4>\n");
        outcome_bar(out, o);
        if let Some(t) = tables::node_outcomes(e) {
            table(out, &t);
        }
        out.push_str(
            "<p>Infra nodes have no verdict (the check was lost to an infrastructure failure and is retried on \
             resume); they are never counted as failures.</p>\n",
        );
        if let Some(t) = tables::failures(e) {
            out.push_str("<h4>Most common failure messages</h4>\n");
            table(out, &t);
        }
    }
    if !e.theorems_detail.is_empty() {
        let t = tables::theorems(e);
        let proved = e
            .theorems_detail
            .iter()
            .filter(|t| t.proved_trees > 0)
            .count();
        let _ =
            writeln!(
            out,
            "<details class=\"tree\"{}>\n<summary>Per theorem ({} theorems, {} proved)</summary>",
            if e.theorems_detail.len() <= 50 { " open=\"open\"" } else { "" },
            e.theorems_detail.len(),
            proved
        );
        table(out, &t);
        out.push_str(
            "<p>First proving sample: the 1-based index of the first tree that proved the theorem. Proving depth: \
             height of the proving tree (0: a flat proof; shallowest–deepest when several trees proved it).</p>\n\
             </details>\n",
        );
    }
    if !e.examples.is_empty() {
        out.push_str("<h4>Example proof trees</h4>\n");
        for x in &e.examples {
            example(out, x);
        }
    }
}

fn example(out: &mut String, x: &ExampleTree) {
    let _ = writeln!(
        out,
        "<details class=\"tree\">\n<summary>{}: {} (tree {}{})</summary>",
        xml(&x.kind),
        xml(&x.theorem),
        x.tree,
        match (x.proved, x.height) {
            (true, Some(h)) => format!(", proved, height {h}"),
            (true, None) => ", proved".to_string(),
            (false, _) => ", not proved".to_string(),
        }
    );
    for n in &x.nodes {
        let kind: String = n
            .verdict
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let _ = writeln!(
            out,
            "<div class=\"node {kind}\">\n<p><strong>depth {}</strong> \u{b7} {} \u{b7} local: <strong>{}</strong>{} \u{b7} global: {}{}</p>",
            n.depth,
            xml(&n.origin),
            xml(&n.verdict),
            if n.truncated { format!(" ({})", crate::model::CUT_LABEL) } else { String::new() },
            xml(if n.global.is_empty() { "\u{2013}" } else { &n.global }),
            if n.lemmas.is_empty() { String::new() } else { format!(" \u{b7} proposes {} lemma{}", n.lemmas.len(), if n.lemmas.len() == 1 { "" } else { "s" }) }
        );
        let _ = writeln!(
            out,
            "<pre>{}\n{}</pre>",
            xml(&n.statement),
            xml(&n.completion)
        );
        if !n.message.is_empty() {
            let _ = writeln!(out, "<pre class=\"msg\">Coq: {}</pre>", xml(&n.message));
        }
        out.push_str("</div>\n");
    }
    if x.omitted_nodes > 0 {
        let _ = writeln!(out, "<p>{} more nodes not shown.</p>", x.omitted_nodes);
    }
    if let Some(p) = &x.assembled_proof {
        let _ = writeln!(
            out,
            "<p>Assembled proof (checked cold by <code>coqc</code>):</p>\n<pre>{}</pre>",
            xml(p)
        );
    }
    out.push_str("</details>\n");
}
