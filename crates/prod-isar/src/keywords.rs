//! Keyword tables: which words (and symbols) are commands, and of which kind.
//!
//! Kinds and categories are those of Isabelle's `Pure/Isar/keyword.ML`. The built-in tables are
//! written as Isar `keywords` declarations and read by the same parser as theory headers, so a
//! theory's own `keywords "foo" :: thy_decl and "bar"` and the built-ins go through one path.

use std::collections::{HashMap, HashSet};

use crate::header::parse_keyword_decls;
pub use crate::keyword_kind::KeywordKind;
use KeywordKind::*;

/// Command and minor keywords known in some theory context.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeywordTable {
    commands: HashMap<String, KeywordKind>,
    minor: HashSet<String>,
    before_command: HashSet<String>,
    /// Command names the lexer splits into several tokens (`@proof` = `@` `proof`), longest
    /// first: Isabelle's scanner matches keywords longest-first, so the segmenter must too.
    split_commands: Vec<String>,
}

/// Pure's bootstrap keywords (`Pure/Thy/thy_header.ML`) and the `Pure.thy` header, written out
/// from Isabelle's sources (kinds as declared there; tags dropped).
const PURE_DECLS: &str = r#"
  "%" "(" ")" "," "::" "=" "and" "begin" "imports" "keywords" "abbrevs"
  and "chapter" "section" "subsection" "subsubsection" "paragraph" "subparagraph" :: document_heading
  and "text" "txt" :: document_body
  and "text_raw" :: document_raw
  and "theory" :: thy_begin
  and "ML" :: thy_decl
  and "!!" "!" "+" ":" ";" "<" "<=" "==" "=>" "?" "[" "\<comment>" "\<equiv>" "\<leftharpoondown>"
    "\<rightharpoonup>" "\<rightleftharpoons>" "\<subseteq>" "]" "binder" "by" "congproc" "identifier"
    "in" "infix" "infixl" "infixr" "is" "open" "output" "overloaded" "passive" "pervasive" "premises"
    "structure" "unchecked" "weak_congproc"
  and "private" "qualified" :: before_command
  and "assumes" "constrains" "defines" "fixes" "for" "if" "includes" "notes" "rewrites"
    "obtains" "shows" "when" "where" "|" :: quasi_command
  and "default_sort" :: thy_decl
  and "typedecl" "nonterminal" "judgment" "consts" "syntax" "no_syntax" "syntax_consts"
    "syntax_types" "translations" "no_translations" "type_notation" "no_type_notation" "notation"
    "no_notation" "alias" "type_alias" "declare" "hide_class" "hide_type" "hide_const"
    "hide_fact" :: thy_decl
  and "type_synonym" "definition" "abbreviation" "lemmas" :: thy_defn
  and "axiomatization" :: thy_stmt
  and "external_file" "bibtex_file" "ROOTS_file" :: thy_load
  and "generate_file" :: thy_decl
  and "export_generated_files" "scala_build_generated_files" "compile_generated_files" :: diag
  and "external_files" "export_files" "export_prefix" "export_classpath"
  and "ML_file" "ML_file_debug" "ML_file_no_debug" :: thy_load % "ML"
  and "SML_file" "SML_file_debug" "SML_file_no_debug" :: thy_load % "ML"
  and "SML_import" "SML_export" "ML_export" :: thy_decl % "ML"
  and "ML_prf" :: prf_decl % "proof"
  and "ML_val" "ML_command" :: diag % "ML"
  and "simproc_setup" :: thy_decl % "ML"
  and "setup" "local_setup" "attribute_setup" "method_setup" "declaration" "syntax_declaration"
    "parse_ast_translation" "parse_translation" "print_translation" "typed_print_translation"
    "print_ast_translation" "oracle" :: thy_decl % "ML"
  and "bundle" :: thy_decl_block
  and "unbundle" :: thy_decl
  and "include" "including" :: prf_decl
  and "print_bundles" :: diag
  and "context" "locale" "experiment" :: thy_decl_block
  and "interpret" :: prf_goal % "proof"
  and "interpretation" "global_interpretation" "sublocale" :: thy_goal
  and "class" :: thy_decl_block
  and "subclass" :: thy_goal
  and "instantiation" :: thy_decl_block
  and "instance" :: thy_goal
  and "overloading" :: thy_decl_block
  and "opening" :: quasi_command
  and "code_datatype" :: thy_decl
  and "theorem" "lemma" "corollary" "proposition" :: thy_goal_stmt
  and "schematic_goal" :: thy_goal_stmt
  and "notepad" :: thy_decl_block
  and "have" "hence" :: prf_goal % "proof"
  and "show" "thus" :: prf_asm_goal % "proof"
  and "then" "from" "with" :: prf_chain % "proof"
  and "note" :: prf_decl % "proof"
  and "supply" :: prf_script % "proof"
  and "using" "unfolding" :: prf_decl % "proof"
  and "fix" "assume" "presume" "define" :: prf_asm % "proof"
  and "consider" :: prf_goal % "proof"
  and "obtain" :: prf_asm_goal % "proof"
  and "let" "write" :: prf_decl % "proof"
  and "case" :: prf_asm % "proof"
  and "{" :: prf_open % "proof"
  and "}" :: prf_close % "proof"
  and "next" :: next_block % "proof"
  and "qed" :: qed_block % "proof"
  and "by" ".." "." "sorry" "\<proof>" :: "qed" % "proof"
  and "done" :: "qed_script" % "proof"
  and "oops" :: qed_global % "proof"
  and "defer" "prefer" "apply" "apply_end" "back" :: prf_script % "proof"
  and "subgoal" :: prf_script_goal % "proof"
  and "proof" :: prf_block % "proof"
  and "also" "moreover" :: prf_decl % "proof"
  and "finally" "ultimately" :: prf_chain % "proof"
  and "help" "print_commands" "print_options" "print_context" "print_theory"
    "print_definitions" "print_syntax" "print_abbrevs" "print_defn_rules"
    "print_theorems" "print_locales" "print_classes" "print_locale"
    "print_interps" "print_attributes"
    "print_simpset" "print_rules" "print_trans_rules" "print_methods"
    "print_antiquotations" "print_ML_antiquotations" "thy_deps"
    "locale_deps" "class_deps" "thm_deps" "thm_oracles" "print_term_bindings"
    "print_facts" "print_cases" "print_statement" "thm" "prf" "full_prf"
    "prop" "term" "typ" "print_codesetup" "print_context_tracing" "unused_thms"
    "print_state" "welcome" "find_theorems" "find_consts" :: diag
  and "end" :: thy_end
  and "realizers" "realizability" "extract_type" "extract" "named_theorems" :: thy_decl
"#;

/// HOL and the Isabelle2022 distribution sessions AFP entries build on (HOL-Library, HOLCF,
/// HOL-Eisbach, HOL-Nominal, HOL-Statespace, HOL-Decision_Procs, …). Isabelle's distribution is not
/// available here, so this table was written by hand from memory of the `keywords` headers of
/// `src/HOL/{HOL,Orderings,Inductive,Typedef,Fun_Def,Partial_Function,Record,Lifting,Transfer,
/// Quotient,Hilbert_Choice,Code_Generator,Predicate_Compile,Nitpick,Nunchaku,Sledgehammer,
/// Quickcheck_*,BNF_*,Ctr_Sugar,Fun}.thy`, `src/HOL/Library/*.thy`, `src/HOL/HOLCF/*.thy`,
/// `src/HOL/Eisbach/Eisbach.thy` and `src/HOL/Nominal/Nominal.thy`, cross-checked against an AFP
/// sweep (identifiers at column 0 that were not commands). AFP entries' own commands come from their theory headers instead.
const HOL_DECLS: &str = r#"
  "try" "solve_direct" "quickcheck" "print_coercions" "print_claset" "print_induct_rules"
    "print_orders" "print_inductives" "print_quot_maps" "print_quotients" "print_quotmapsQ3"
    "print_quotientsQ3" "print_quotconsts" "print_record" "print_bnfs" "print_case_translations"
    "print_codeproc" "code_thms" "code_deps" "values" "value" "nitpick" "nunchaku" "sledgehammer"
    "refute" "try0" "find_unused_assms" "print_transfer_rules"
    "print_lazy_types" "smt_status" :: diag
  and "quickcheck_params" "quickcheck_generator" "nitpick_params" "nunchaku_params"
    "sledgehammer_params" "refute_params" "setup_lifting" "lifting_forget" "lifting_update"
    "datatype" "codatatype" "datatype_compat" "primcorec" "bnf_axiomatization" "copy_bnf"
    "code_identifier" "code_printing" "code_reserved" "code_monad" "code_reflect" "export_code"
    "simps_of_case" "case_of_simps" "adhoc_overloading" "no_adhoc_overloading" "datatype_record"
    "parametric_constant" "code_lazy_type" "activate_lazy_type" "deactivate_lazy_type"
    "activate_lazy_types" "deactivate_lazy_types" "old_datatype"
    "unoverload_definition" :: thy_decl
  and "inductive" "coinductive" "inductive_cases" "inductive_simps" "inductive_set"
    "coinductive_set" "primrec" "fun" "fun_cases" "partial_function" "record" :: thy_defn
  and "typedef" "function" "termination" "lift_definition" "specification" :: thy_goal_defn
  and "old_rep_datatype" "quotient_type" "quotient_definition" "code_pred" "bnf" "lift_bnf"
    "free_constructors" "functor" "primcorecursive" :: thy_goal
  and "guess" :: prf_script_asm_goal
  and "morphisms" :: quasi_command
  and "monos" "parametric" "/"
"#;

/// Keywords of distribution sessions whose command names are common words (`domain`,
/// `method`): they apply only to theories that import, directly or through AFP theories, a
/// theory whose name starts with one of the prefixes (e.g. `HOLCF`, `"HOLCF-Library.Nat_Discrete"`).
/// Written from memory of the Isabelle2022 headers named in `HOL_DECLS`'s comment.
pub const DISTRIBUTION_GROUPS: &[(&[&str], &str)] = &[
    (
        &["HOLCF"],
        r#""domain" "domaindef" "domain_isomorphism" :: thy_decl and "fixrec" :: thy_defn
           and "cpodef" "pcpodef" :: thy_goal and "lazy" "unsafe""#,
    ),
    (
        &["HOL-Eisbach"],
        r#""method" :: thy_decl and "conclusion" "declares" "methods" "uses""#,
    ),
    (&["HOL-Statespace"], r#""statespace" :: thy_decl"#),
    (&["HOL-Library.Code_Test"], r#""test_code" :: diag"#),
    (&["HOL-Decision_Procs"], r#""approximate" :: diag"#),
    (
        &["HOL-Library.BNF_Corec"],
        r#""corec" :: thy_defn and "corecursive" "friend_of_corec" :: thy_goal
           and "coinduction_upto" :: thy_decl"#,
    ),
    (
        &["HOL-Nominal"],
        r#""atom_decl" "nominal_datatype" "equivariance" :: thy_decl
           and "nominal_primrec" "nominal_inductive" "nominal_inductive2" :: thy_goal and "avoids""#,
    ),
    (
        &["HOL-Library.Old_Recdef"],
        r#""recdef" "defer_recdef" :: thy_decl and "recdef_tc" :: thy_goal and "permissive" "congs""#,
    ),
];

impl KeywordTable {
    /// No keywords at all.
    pub fn new() -> Self {
        Self::default()
    }

    /// Pure's bootstrap keywords and `Pure.thy`'s.
    pub fn pure() -> Self {
        let mut t = Self::new();
        t.add_decls_text(PURE_DECLS);
        t
    }

    /// Pure plus HOL and the distribution sessions AFP entries use (see `HOL_DECLS`).
    pub fn hol() -> Self {
        let mut t = Self::pure();
        t.add_decls_text(HOL_DECLS);
        t
    }

    /// Adds the [`DISTRIBUTION_GROUPS`] triggered by `imports` (theory names as written in
    /// headers, e.g. `HOLCF` or `HOL-Eisbach.Eisbach`).
    pub fn add_distribution_imports<'s>(&mut self, imports: impl IntoIterator<Item = &'s str>) {
        let imports: Vec<&str> = imports.into_iter().collect();
        for (prefixes, decls) in DISTRIBUTION_GROUPS {
            if imports
                .iter()
                .any(|i| prefixes.iter().any(|p| i.starts_with(p)))
            {
                self.add_decls_text(decls);
            }
        }
    }

    fn add_decls_text(&mut self, text: &str) {
        let (decls, errors) = parse_keyword_decls(text);
        debug_assert!(errors.is_empty(), "built-in keyword table: {errors:?}");
        for d in decls {
            self.add(&d.name, d.kind);
        }
    }

    /// Declares `name`: a command of `kind`, or a minor keyword when `kind` is `None`,
    /// `before_command` or `quasi_command` (as `Keyword.add_keywords` does).
    pub fn add(&mut self, name: &str, kind: Option<KeywordKind>) {
        match kind {
            Some(k) if k.is_command() => {
                let (toks, errs) = crate::lexer::lex(name);
                if (toks.len() != 1 || !errs.is_empty())
                    && !self.split_commands.iter().any(|n| n == name)
                {
                    self.split_commands.push(name.to_string());
                    self.split_commands
                        .sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
                }
                self.commands.insert(name.to_string(), k);
            }
            Some(k) => {
                self.minor.insert(name.to_string());
                self.commands.remove(name);
                if k == BeforeCommand {
                    self.before_command.insert(name.to_string());
                }
            }
            None => {
                self.minor.insert(name.to_string());
            }
        }
    }

    /// Adds every keyword of `other`.
    pub fn merge(&mut self, other: &KeywordTable) {
        for (k, v) in &other.commands {
            self.add(k, Some(*v));
        }
        self.minor.extend(other.minor.iter().cloned());
        self.before_command
            .extend(other.before_command.iter().cloned());
    }

    /// Adds the keywords a theory header declares.
    pub fn extend_from_header(&mut self, header: &crate::header::TheoryHeader) {
        for d in &header.keywords {
            self.add(&d.name, d.kind);
        }
    }

    /// The command kind of `name`, if it is a command keyword.
    pub fn command_kind(&self, name: &str) -> Option<KeywordKind> {
        self.commands.get(name).copied()
    }

    /// Command names that the lexer splits into several tokens, longest first.
    pub fn split_commands(&self) -> &[String] {
        &self.split_commands
    }

    /// Whether `name` is a command keyword.
    pub fn is_command(&self, name: &str) -> bool {
        self.commands.contains_key(name)
    }

    /// Whether `name` is a minor keyword (including quasi and before-command keywords).
    pub fn is_minor(&self, name: &str) -> bool {
        self.minor.contains(name)
    }

    /// `private` / `qualified` (and any keyword declared `before_command`).
    pub fn is_before_command(&self, name: &str) -> bool {
        self.before_command.contains(name)
    }

    /// All command names, sorted.
    pub fn command_names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.commands.keys().map(String::as_str).collect();
        v.sort_unstable();
        v
    }

    /// Number of command keywords.
    pub fn len(&self) -> usize {
        self.commands.len()
    }

    /// True when no command is declared.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_tables_parse_and_classify() {
        let (_, errs) = parse_keyword_decls(PURE_DECLS);
        assert!(errs.is_empty(), "{errs:?}");
        let (_, errs) = parse_keyword_decls(HOL_DECLS);
        assert!(errs.is_empty(), "{errs:?}");
        let t = KeywordTable::hol();
        assert_eq!(t.command_kind("lemma"), Some(ThyGoalStmt));
        assert_eq!(t.command_kind("by"), Some(Qed));
        assert_eq!(t.command_kind("."), Some(Qed));
        assert_eq!(t.command_kind("\\<proof>"), Some(Qed));
        assert_eq!(t.command_kind("done"), Some(QedScript));
        assert_eq!(t.command_kind("oops"), Some(QedGlobal));
        assert_eq!(t.command_kind("{"), Some(PrfOpen));
        assert_eq!(t.command_kind("function"), Some(ThyGoalDefn));
        assert_eq!(t.command_kind("datatype"), Some(ThyDecl));
        assert_eq!(t.command_kind("section"), Some(DocumentHeading));
        assert!(t.command_kind("shows").is_none() && t.is_minor("shows"));
        assert!(t.is_before_command("private"));
        assert!(!t.is_command("private"));
    }
}
