//! ProD's prompt format (paper §3.1): the input `x = c s` as text, the context then the
//! statement, each ending in a newline. One definition for every place that writes a prompt:
//! the native policy tokenises the two parts separately (`prod_policy::prompt`), the export to
//! RL frameworks writes them as one text (`prod_library::export`), and the template shipped
//! with a model states them (`prompt_template.json`).

/// The two texts a prompt is made of: the context part (`None` for an empty context; its
/// trailing whitespace removed, then a newline) and the statement part (trimmed, then a
/// newline).
pub fn prompt_parts(context: &str, statement: &str) -> (Option<String>, String) {
    let context = context.trim_end();
    (
        (!context.is_empty()).then(|| format!("{context}\n")),
        format!("{}\n", statement.trim()),
    )
}

/// The prompt as one text: the two [`prompt_parts`] joined, `{context}\n{statement}\n`, or
/// `{statement}\n` for an empty context.
pub fn prompt_text(context: &str, statement: &str) -> String {
    let (context, statement) = prompt_parts(context, statement);
    context.unwrap_or_default() + &statement
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_is_the_context_then_the_statement() {
        assert_eq!(prompt_text("", " Lemma a : True. "), "Lemma a : True.\n");
        assert_eq!(prompt_text(" \n ", "Lemma a : True."), "Lemma a : True.\n");
        assert_eq!(
            prompt_text("C.\n\n", "Lemma a : True."),
            "C.\nLemma a : True.\n"
        );
        assert_eq!(
            prompt_parts("C.", "S."),
            (Some("C.\n".to_string()), "S.\n".to_string())
        );
    }
}
