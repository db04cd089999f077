//! Escaping and number formatting. Every string in a report comes from a run file and is
//! untrusted (theorem and evaluation names, notes): it is escaped for the one place it goes.
//! Numbers that are not finite are never printed as numbers (`n/a` in text; SVG skips them).

/// Escape for XML/HTML text and double-quoted attribute values. Characters XML 1.0 forbids
/// (most C0 controls, U+FFFE/U+FFFF) become U+FFFD so that the SVG stays well-formed.
pub fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(ch),
            c if (c as u32) < 0x20
                || c == '\u{7f}'
                || c == '\u{fffe}'
                || c == '\u{ffff}'
                || is_bidi_control(c) =>
            {
                out.push('\u{fffd}')
            }
            c => out.push(c),
        }
    }
    out
}

/// Escape for inline Markdown (a table cell): no line breaks, no HTML, no links, emphasis or
/// code, no cell separators.
pub fn md(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let line: String = s
        .chars()
        .map(|c| {
            if c.is_control() {
                ' '
            } else if is_bidi_control(c) || c == '\u{fffe}' || c == '\u{ffff}' {
                '\u{fffd}'
            } else {
                c
            }
        })
        .collect();
    for ch in line.trim().chars() {
        if matches!(
            ch,
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '&' | '#' | '~' | '!' | '$'
        ) {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

/// Escape for text that starts a Markdown line (a list item, a heading): as [`md`], and no
/// leading block marker either (`-`, `+`, `=`, `1.`), which would start a nested list or a
/// setext heading.
pub fn md_line(s: &str) -> String {
    let e = md(s);
    let digits = e.chars().take_while(|c| c.is_ascii_digit()).count();
    if e.starts_with(['-', '+', '=']) {
        format!("\\{e}")
    } else if digits > 0 && e[digits..].starts_with(['.', ')']) {
        format!("{}\\{}", &e[..digits], &e[digits..])
    } else {
        e
    }
}

/// At most `max` characters, with an ellipsis when cut (labels in plots; the full text goes in
/// a tooltip).
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
    t.push('…');
    t
}

/// A share in [0, 1] as a percentage with one decimal, e.g. `42.3%`.
pub fn percent(x: f64) -> String {
    let p = x * 100.0;
    if p.is_finite() {
        format!("{}%", fixed(p, 1))
    } else {
        "n/a".to_string()
    }
}

pub fn opt_percent(x: Option<f64>) -> String {
    x.map_or_else(|| "n/a".to_string(), percent)
}

/// A number with `decimals` decimals; `n/a` when not finite.
pub fn fixed(x: f64, decimals: usize) -> String {
    if x.is_finite() {
        let s = format!("{x:.decimals$}");
        // "-0.000" reads like a sign error.
        if s.starts_with('-') && s[1..].chars().all(|c| c == '0' || c == '.') {
            s[1..].to_string()
        } else {
            s
        }
    } else {
        "n/a".to_string()
    }
}

pub fn opt_fixed(x: Option<f64>, decimals: usize) -> String {
    x.map_or_else(|| "n/a".to_string(), |x| fixed(x, decimals))
}

/// A number as short as it can be while keeping up to `max_decimals` (temperatures: `0.7`, `1`).
pub fn short(x: f64, max_decimals: usize) -> String {
    let s = fixed(x, max_decimals);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A pass@k cell: `42.3% (38.1–46.5)`, the interval in percentage points (parentheses, not
/// brackets, which Markdown would need escaped).
pub fn pass_cell(estimate: f64, lo: f64, hi: f64) -> String {
    let point = percent(estimate);
    let (a, b) = (lo * 100.0, hi * 100.0);
    if a.is_finite() && b.is_finite() && (lo != estimate || hi != estimate) {
        format!("{point} ({}–{})", fixed(a, 1), fixed(b, 1))
    } else {
        point
    }
}

/// Bidirectional overrides and isolates reorder what a reader sees ("Trojan source"); names
/// in a report must read as they are stored.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_escapes_markup_and_controls() {
        assert_eq!(
            xml("a<b & \"c\" 'd'>"),
            "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;"
        );
        assert_eq!(xml("x\u{0}y\u{1b}z\u{ffff}"), "x\u{fffd}y\u{fffd}z\u{fffd}");
        assert_eq!(xml("tab\tok"), "tab\tok");
        assert_eq!(xml("a\u{202e}b"), "a\u{fffd}b");
        assert_eq!(md("a\u{2066}b"), "a\u{fffd}b");
    }

    #[test]
    fn md_neutralises_markup() {
        assert_eq!(md("a|b"), "a\\|b");
        assert_eq!(md("<script>x</script>"), "\\<script\\>x\\</script\\>");
        assert_eq!(md("[x](http://e)"), "\\[x\\](http://e)");
        assert_eq!(md("- item"), "- item");
        assert_eq!(md_line("- item"), "\\- item");
        assert_eq!(md_line("12. x"), "12\\. x");
        assert_eq!(md_line("12 x"), "12 x");
        assert_eq!(md("0.7"), "0.7");
        assert_eq!(md("line\nbreak"), "line break");
        assert_eq!(md("ProD-RL round 3"), "ProD-RL round 3");
    }

    #[test]
    fn numbers() {
        assert_eq!(percent(0.4234), "42.3%");
        assert_eq!(percent(f64::NAN), "n/a");
        assert_eq!(fixed(-0.0001, 3), "0.000");
        assert_eq!(fixed(f64::INFINITY, 2), "n/a");
        assert_eq!(short(0.70, 2), "0.7");
        assert_eq!(short(1.0, 2), "1");
        assert_eq!(pass_cell(0.5, 0.4, 0.6), "50.0% (40.0–60.0)");
        assert_eq!(pass_cell(0.5, 0.5, 0.5), "50.0%");
        assert_eq!(pass_cell(1e308, -1e308, 1e308), "n/a");
        assert_eq!(percent(1e308), "n/a");
        assert_eq!(percent(-0.00001), "0.0%");
        assert_eq!(truncate("abcdef", 4), "abc…");
    }
}
