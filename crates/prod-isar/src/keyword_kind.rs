//! [`KeywordKind`]: the kinds of Isabelle's `Pure/Isar/keyword.ML`, by name. Its own module
//! because both the theory-header parser (a `keywords` declaration names a kind) and the
//! keyword tables use it.

/// Keyword kinds of `keyword.ML` (command kinds plus the two minor-keyword kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeywordKind {
    Diag,
    DocumentHeading,
    DocumentBody,
    DocumentRaw,
    ThyBegin,
    ThyEnd,
    ThyDecl,
    ThyDeclBlock,
    ThyDefn,
    ThyStmt,
    ThyLoad,
    ThyGoal,
    ThyGoalDefn,
    ThyGoalStmt,
    Qed,
    QedScript,
    QedBlock,
    QedGlobal,
    PrfGoal,
    PrfBlock,
    NextBlock,
    PrfOpen,
    PrfClose,
    PrfChain,
    PrfDecl,
    PrfAsm,
    PrfAsmGoal,
    PrfScript,
    PrfScriptGoal,
    PrfScriptAsmGoal,
    /// `private`, `qualified`: minor, attach to the next command.
    BeforeCommand,
    /// `assumes`, `shows`, `where`, …: minor, never start a command.
    QuasiCommand,
}

use KeywordKind::*;

const ALL_KINDS: &[(KeywordKind, &str)] = &[
    (Diag, "diag"),
    (DocumentHeading, "document_heading"),
    (DocumentBody, "document_body"),
    (DocumentRaw, "document_raw"),
    (ThyBegin, "thy_begin"),
    (ThyEnd, "thy_end"),
    (ThyDecl, "thy_decl"),
    (ThyDeclBlock, "thy_decl_block"),
    (ThyDefn, "thy_defn"),
    (ThyStmt, "thy_stmt"),
    (ThyLoad, "thy_load"),
    (ThyGoal, "thy_goal"),
    (ThyGoalDefn, "thy_goal_defn"),
    (ThyGoalStmt, "thy_goal_stmt"),
    (Qed, "qed"),
    (QedScript, "qed_script"),
    (QedBlock, "qed_block"),
    (QedGlobal, "qed_global"),
    (PrfGoal, "prf_goal"),
    (PrfBlock, "prf_block"),
    (NextBlock, "next_block"),
    (PrfOpen, "prf_open"),
    (PrfClose, "prf_close"),
    (PrfChain, "prf_chain"),
    (PrfDecl, "prf_decl"),
    (PrfAsm, "prf_asm"),
    (PrfAsmGoal, "prf_asm_goal"),
    (PrfScript, "prf_script"),
    (PrfScriptGoal, "prf_script_goal"),
    (PrfScriptAsmGoal, "prf_script_asm_goal"),
    (BeforeCommand, "before_command"),
    (QuasiCommand, "quasi_command"),
];

impl KeywordKind {
    /// The kind named as in `keyword.ML` (`"thy_goal_stmt"`), if known.
    pub fn from_name(name: &str) -> Option<Self> {
        ALL_KINDS.iter().find(|(_, n)| *n == name).map(|(k, _)| *k)
    }

    /// The name as in `keyword.ML`.
    pub fn name(self) -> &'static str {
        ALL_KINDS
            .iter()
            .find(|(k, _)| *k == self)
            .map(|(_, n)| *n)
            .unwrap_or("?")
    }

    /// Command kinds start a command span; `before_command` and `quasi_command` do not.
    pub fn is_command(self) -> bool {
        !matches!(self, BeforeCommand | QuasiCommand)
    }

    /// `thy_goal`, `thy_goal_defn`, `thy_goal_stmt`: a theory-level statement that opens a proof.
    pub fn is_theory_goal(self) -> bool {
        matches!(self, ThyGoal | ThyGoalDefn | ThyGoalStmt)
    }

    /// Proof goals: `have`, `show`, `obtain`, `subgoal`, … (each needs its own proof).
    pub fn is_proof_goal(self) -> bool {
        matches!(
            self,
            PrfGoal | PrfAsmGoal | PrfScriptGoal | PrfScriptAsmGoal
        )
    }

    /// `by . .. sorry \<proof>` (qed), `done` (qed_script), `qed` (qed_block).
    pub fn is_qed(self) -> bool {
        matches!(self, Qed | QedScript | QedBlock)
    }

    /// `oops`.
    pub fn is_qed_global(self) -> bool {
        self == QedGlobal
    }

    /// Proof goals and `{`.
    pub fn is_proof_open(self) -> bool {
        self.is_proof_goal() || self == PrfOpen
    }

    /// qed kinds and `}`.
    pub fn is_proof_close(self) -> bool {
        self.is_qed() || self == PrfClose
    }

    /// Every proof command kind (`keyword.ML`'s `is_proof`).
    pub fn is_proof(self) -> bool {
        matches!(
            self,
            Qed | QedScript
                | QedBlock
                | QedGlobal
                | PrfGoal
                | PrfBlock
                | NextBlock
                | PrfOpen
                | PrfClose
                | PrfChain
                | PrfDecl
                | PrfAsm
                | PrfAsmGoal
                | PrfScript
                | PrfScriptGoal
                | PrfScriptAsmGoal
        )
    }

    /// Kinds allowed inside a proof besides proof commands: diagnostics and document text.
    pub fn is_vacuous(self) -> bool {
        matches!(self, Diag | DocumentHeading | DocumentBody | DocumentRaw)
    }

    /// Theory-level kinds (`keyword.ML`'s `is_theory`).
    pub fn is_theory(self) -> bool {
        matches!(
            self,
            ThyBegin
                | ThyEnd
                | ThyLoad
                | ThyDecl
                | ThyDeclBlock
                | ThyDefn
                | ThyStmt
                | ThyGoal
                | ThyGoalDefn
                | ThyGoalStmt
        )
    }

    /// `apply`-style kinds (`keyword.ML`'s `is_improper`).
    pub fn is_improper(self) -> bool {
        matches!(
            self,
            QedScript | PrfScript | PrfScriptGoal | PrfScriptAsmGoal
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_name() {
        for (k, n) in ALL_KINDS {
            assert_eq!(KeywordKind::from_name(n), Some(*k));
            assert_eq!(k.name(), *n);
        }
    }
}
