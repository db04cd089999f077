//! A tiny XML well-formedness checker (enough for the report's SVG and XHTML-style HTML), so
//! the tests need no XML crate: balanced tags, quoted unique attributes, valid entities, no
//! characters XML forbids, one root element. It also returns every element's attributes, so
//! tests can check that numeric attributes are finite numbers.

#![allow(dead_code)]

pub type Element = (String, Vec<(String, String)>);

fn entity_ok(s: &str) -> bool {
    match s {
        "amp" | "lt" | "gt" | "quot" | "apos" => true,
        _ => {
            if let Some(hex) = s.strip_prefix("#x") {
                u32::from_str_radix(hex, 16)
                    .ok()
                    .and_then(char::from_u32)
                    .is_some()
            } else if let Some(dec) = s.strip_prefix('#') {
                dec.parse::<u32>().ok().and_then(char::from_u32).is_some()
            } else {
                false
            }
        }
    }
}

fn check_text(s: &str, at: usize) -> Result<(), String> {
    for (i, ch) in s.char_indices() {
        let code = ch as u32;
        if (code < 0x20 && !matches!(ch, '\t' | '\n' | '\r'))
            || ch == '\u{fffe}'
            || ch == '\u{ffff}'
        {
            return Err(format!(
                "forbidden character U+{code:04X} at byte {}",
                at + i
            ));
        }
        if ch == '<' {
            return Err(format!("raw '<' at byte {}", at + i));
        }
        if ch == '&' {
            let rest = &s[i + 1..];
            let end = rest
                .find(';')
                .ok_or_else(|| format!("unterminated entity at byte {}", at + i))?;
            if !entity_ok(&rest[..end]) {
                return Err(format!("bad entity &{}; at byte {}", &rest[..end], at + i));
            }
        }
    }
    Ok(())
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '-' | '.')
}

/// Check `doc` (an optional `<!DOCTYPE html>` first) and return its elements in order.
pub fn check(doc: &str) -> Result<Vec<Element>, String> {
    let mut s = doc;
    let mut base = 0;
    if let Some(rest) = s.strip_prefix("<!DOCTYPE html>") {
        base = doc.len() - rest.len();
        s = rest;
    }
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut stack: Vec<String> = Vec::new();
    let mut roots = 0;
    let mut elements = Vec::new();
    let mut text_start = 0;
    while i < bytes.len() {
        if bytes[i] != b'<' {
            i += 1;
            continue;
        }
        let text = &s[text_start..i];
        if stack.is_empty() && !text.trim().is_empty() {
            return Err(format!(
                "text outside the root element at byte {}",
                base + text_start
            ));
        }
        check_text(text, base + text_start)?;
        let at = base + i;
        if s[i..].starts_with("<!--") {
            let end = s[i + 4..]
                .find("-->")
                .ok_or_else(|| format!("unterminated comment at byte {at}"))?;
            if s[i + 4..i + 4 + end].contains("--") {
                return Err(format!("'--' inside a comment at byte {at}"));
            }
            i += 4 + end + 3;
        } else if s[i..].starts_with("</") {
            let end = s[i..]
                .find('>')
                .ok_or_else(|| format!("unterminated end tag at byte {at}"))?;
            let name = s[i + 2..i + end].trim();
            match stack.pop() {
                Some(open) if open == name => {}
                other => return Err(format!("end tag </{name}> at byte {at} closes {other:?}")),
            }
            i += end + 1;
        } else {
            let mut j = i + 1;
            let name_end = s[j..]
                .find(|c: char| !is_name_char(c))
                .map_or(s.len(), |k| j + k);
            let name = s[j..name_end].to_string();
            if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                return Err(format!("bad tag name at byte {at}"));
            }
            j = name_end;
            let mut attrs: Vec<(String, String)> = Vec::new();
            let self_closed;
            loop {
                let ws = s[j..]
                    .find(|c: char| !c.is_ascii_whitespace())
                    .map_or(s.len(), |k| j + k);
                let had_space = ws > j;
                j = ws;
                if s[j..].starts_with("/>") {
                    self_closed = true;
                    j += 2;
                    break;
                }
                if s[j..].starts_with('>') {
                    self_closed = false;
                    j += 1;
                    break;
                }
                if j >= s.len() {
                    return Err(format!("unterminated tag <{name}> at byte {at}"));
                }
                if !had_space {
                    return Err(format!(
                        "missing space before attribute in <{name}> at byte {}",
                        base + j
                    ));
                }
                let an_end = s[j..]
                    .find(|c: char| !is_name_char(c))
                    .map_or(s.len(), |k| j + k);
                let an = s[j..an_end].to_string();
                if an.is_empty() {
                    return Err(format!("bad attribute in <{name}> at byte {}", base + j));
                }
                if !s[an_end..].starts_with("=\"") {
                    return Err(format!(
                        "attribute {an} of <{name}> is not =\"…\" at byte {}",
                        base + an_end
                    ));
                }
                let v_start = an_end + 2;
                let v_len = s[v_start..]
                    .find('"')
                    .ok_or_else(|| format!("unterminated attribute {an} at byte {at}"))?;
                let value = &s[v_start..v_start + v_len];
                check_text(value, base + v_start)?;
                if attrs.iter().any(|(n, _)| *n == an) {
                    return Err(format!("duplicate attribute {an} in <{name}> at byte {at}"));
                }
                attrs.push((an, value.to_string()));
                j = v_start + v_len + 1;
            }
            if stack.is_empty() {
                roots += 1;
            }
            elements.push((name.clone(), attrs));
            if !self_closed {
                stack.push(name);
            }
            i = j;
        }
        text_start = i;
    }
    if !s[text_start..].trim().is_empty() {
        return Err("text after the root element".to_string());
    }
    if let Some(open) = stack.pop() {
        return Err(format!("<{open}> is never closed"));
    }
    if roots != 1 {
        return Err(format!("{roots} root elements"));
    }
    Ok(elements)
}

/// Every numeric SVG attribute (coordinates, sizes, path data, viewBox, transform) holds only
/// finite numbers.
pub fn check_numbers(elements: &[Element]) -> Result<(), String> {
    const NUMERIC: [&str; 12] = [
        "x",
        "y",
        "x1",
        "y1",
        "x2",
        "y2",
        "cx",
        "cy",
        "r",
        "width",
        "height",
        "stroke-width",
    ];
    for (name, attrs) in elements {
        for (a, v) in attrs {
            let numbers: Vec<&str> = if NUMERIC.contains(&a.as_str()) {
                vec![v.as_str()]
            } else if a == "d" || a == "viewBox" || a == "transform" || a == "stroke-dasharray" {
                v.split(|c: char| c.is_ascii_whitespace() || c == '(' || c == ')' || c == ',')
                    .filter(|t| !t.is_empty() && *t != "rotate")
                    .map(|t| t.trim_start_matches(['M', 'L', 'H', 'V', 'Z']))
                    .filter(|t| !t.is_empty())
                    .collect()
            } else {
                continue;
            };
            for n in numbers {
                match n.parse::<f64>() {
                    Ok(x) if x.is_finite() && !n.contains("inf") && !n.contains("NaN") => {}
                    _ => {
                        return Err(format!(
                            "<{name} {a}=\"{v}\">: {n:?} is not a finite number"
                        ))
                    }
                }
            }
        }
    }
    Ok(())
}

#[test]
fn the_checker_rejects_what_it_should() {
    assert!(check("<svg><g/></svg>").is_ok());
    assert!(check("<!DOCTYPE html>\n<html><p>a &amp; b</p></html>\n").is_ok());
    assert!(check("<svg><g></svg>").is_err());
    assert!(check("<svg>a < b</svg>").is_err());
    assert!(check("<svg>a & b</svg>").is_err());
    assert!(check("<svg>&bogus;</svg>").is_err());
    assert!(check("<svg x=\"1\" x=\"2\"/>").is_err());
    assert!(check("<svg x=1/>").is_err());
    assert!(check("<svg/><svg/>").is_err());
    assert!(check("<svg>\u{1}</svg>").is_err());
    assert!(check("<svg><!-- a -- b --></svg>").is_err());
    assert!(check_numbers(&check("<svg x=\"NaN\"/>").unwrap()).is_err());
    assert!(check_numbers(&check("<path d=\"M0 0 Linf 2\"/>").unwrap()).is_err());
    assert!(check_numbers(&check("<path d=\"M0 0 L1.5 2\"/>").unwrap()).is_ok());
    assert!(check_numbers(&check("<text transform=\"rotate(-90 14 160.0)\"/>").unwrap()).is_ok());
}
