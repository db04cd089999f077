//! The universe context of a universe-polymorphic constant as `About` prints it under `Printing
//! Universes` (a context with `Set Universe Polymorphism`):
//!
//! ```text
//! h@{u u0} :
//! forall A : Type@{u}, {B : Type@{u0} & A = B}
//! (* u u0 |= u < sigT.u0
//!            u = u0 *)
//! ```
//!
//! A proof of such a statement adds its constraints to the constant's own universe context
//! (`u = u0` above), where `Print Universes Subgraph` of global levels never sees them; the
//! session compares this context with the same statement's restated fresh and admitted. The
//! reading is strict: anything it cannot read is an error, which the session takes as "the
//! proof may constrain its levels" (never as "it does not").

/// A polymorphic constant's universe context.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PolyContext {
    /// Its bound levels, in the order of its instance (`u u0`).
    pub levels: Vec<String>,
    /// Its type as printed, with those level names.
    pub type_text: String,
    /// Its constraints, one `left op right` each (`op`: `<`, `<=`, `=`).
    pub constraints: Vec<String>,
}

/// `About name.`'s output under `Printing Universes`: `None` when `name` is not universe
/// polymorphic (its first line is not `name@{…} :` and no line says `name is universe
/// polymorphic`), `Some(Err(why))` when it is and its context cannot be read.
pub(crate) fn poly_context(about: &str, name: &str) -> Option<Result<PolyContext, String>> {
    let mut lines = about.lines().skip_while(|l| l.trim().is_empty());
    let head = lines
        .next()
        .and_then(|l| l.trim_start().strip_prefix(name)?.strip_prefix("@{"));
    match head {
        Some(head) => Some(read_context(head, lines)),
        // Said to be polymorphic, in a form this reader does not know (another release).
        None if about
            .lines()
            .any(|l| l.trim() == format!("{name} is universe polymorphic")) =>
        {
            Some(Err("not printed as `name@{…} :`".into()))
        }
        None => None,
    }
}

/// The context after `name@{` (`head`: the rest of the first line).
fn read_context<'a>(
    head: &str,
    mut lines: impl Iterator<Item = &'a str>,
) -> Result<PolyContext, String> {
    let (inst, after) = head.split_once('}').ok_or("no `}` after the instance")?;
    let levels = level_list(inst)?;
    let mut type_text = after
        .strip_prefix(" :")
        .ok_or("no ` :` after the instance")?
        .trim()
        .to_string();
    let mut block = None;
    for line in lines.by_ref() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("(*") {
            block = Some(rest.to_string());
            break;
        }
        if t.is_empty() {
            break;
        }
        if !type_text.is_empty() {
            type_text.push('\n');
        }
        type_text.push_str(t);
    }
    let constraints = match block {
        None if levels.is_empty() => vec![],
        None => return Err("no universe context after the type".into()),
        Some(first) => read_block(&first, lines, &levels)?,
    };
    Ok(PolyContext {
        levels,
        type_text,
        constraints,
    })
}

/// The `(* levels |= constraints *)` block, from the rest of its first line on.
fn read_block<'a>(
    first: &str,
    lines: impl Iterator<Item = &'a str>,
    levels: &[String],
) -> Result<Vec<String>, String> {
    let (bound, rest) = first.split_once("|=").ok_or("no `|=` in the context")?;
    if level_list(bound)? != levels {
        return Err("the context binds other levels than the instance".into());
    }
    let mut text = rest.to_string();
    if !text.contains("*)") {
        for line in lines {
            text.push('\n');
            text.push_str(line);
            if line.contains("*)") {
                break;
            }
        }
    }
    let (body, _) = text.split_once("*)").ok_or("the context is not closed")?;
    let mut out = vec![];
    let mut left = String::new();
    for line in body.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (l, op, r) = match words.as_slice() {
            [op, r] if !left.is_empty() => (left.clone(), *op, *r),
            [l, op, r] => (l.to_string(), *op, *r),
            _ => return Err(format!("not a constraint: `{line}`")),
        };
        if !matches!(op, "<" | "<=" | "=") || !is_level(&l) || !is_level(r) {
            return Err(format!("not a constraint: `{line}`"));
        }
        out.push(format!("{l} {op} {r}"));
        left = l;
    }
    Ok(out)
}

/// Blank-separated level names.
fn level_list(text: &str) -> Result<Vec<String>, String> {
    let levels: Vec<String> = text.split_whitespace().map(str::to_string).collect();
    match levels.iter().find(|l| !is_level(l)) {
        Some(bad) => Err(format!("not a level name: `{bad}`")),
        None => Ok(levels),
    }
}

/// A level as Coq prints one: a (qualified) name or a numbered global level
/// (`Coq.Lists.List.247`), nothing that could end or extend the sentence it is put in.
fn is_level(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('.')
        && !s.ends_with('.')
        && s.chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '\'' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROVED: &str = "h@{u u0} :\nforall A : Type@{u}, {B : Type@{u0} & A = B}\n\
        (* u u0 |= u < sigT.u0\n           u < eq.u0\n           u = u0 *)\n\n\
        h is universe polymorphic\nArguments h A%type_scope\nh is opaque\n";

    #[test]
    fn a_polymorphic_context_is_read_whole() {
        let c = poly_context(PROVED, "h").unwrap().unwrap();
        assert_eq!(c.levels, ["u", "u0"]);
        assert_eq!(c.type_text, "forall A : Type@{u}, {B : Type@{u0} & A = B}");
        assert_eq!(c.constraints, ["u < sigT.u0", "u < eq.u0", "u = u0"]);
        // No level, no context; a one-line type.
        let t = poly_context("t@{} : 1 = 1\n\nt is universe polymorphic\n", "t")
            .unwrap()
            .unwrap();
        assert_eq!((t.levels.len(), t.type_text.as_str()), (0, "1 = 1"));
        assert!(t.constraints.is_empty());
        // A context on one line, with a left side left out (as `Print Universes` writes it).
        let one = "p@{u} :\nforall (A : Type@{u}) (l : list A), rev (rev l) = l\n\
                   (* u |= u <= eq.u0\n        <= Coq.Lists.List.247 *)\n";
        let p = poly_context(one, "p").unwrap().unwrap();
        assert_eq!(p.constraints, ["u <= eq.u0", "u <= Coq.Lists.List.247"]);
    }

    #[test]
    fn a_monomorphic_constant_is_none_and_anything_unreadable_an_error() {
        let mono = "h : forall A : Type@{h.u0}, {B : Type@{h.u1} & A = B}\n\nh is not universe polymorphic\n";
        assert_eq!(poly_context(mono, "h"), None);
        assert_eq!(poly_context(PROVED, "g"), None);
        // Polymorphic in a form this reader does not know: an error, never monomorphic.
        let other = PROVED.replacen("h@{", "h @{", 1);
        assert!(matches!(poly_context(&other, "h"), Some(Err(_))), "{other}");
        for bad in [
            PROVED.replace("u = u0", "u = u0. Axiom x"),
            PROVED.replace("u u0 |=", "u |="),
            PROVED.replace(" *)", ""),
            PROVED.replace("(* u u0 |= u < sigT.u0\n", "\n"),
            PROVED.replace("u < eq.u0", "u ~ eq.u0"),
            "h@{u u0 :\n".to_string(),
        ] {
            assert!(
                matches!(poly_context(&bad, "h"), Some(Err(_))),
                "{bad}: {:?}",
                poly_context(&bad, "h")
            );
        }
    }
}
