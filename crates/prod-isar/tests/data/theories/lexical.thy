theory Lexical
  imports Main
begin

(* nested (* comments *) and "strings" in comments *)
lemma lex_\<alpha>\<^sub>1': "\<forall>x. x = x" \<comment> \<open>nested \<open>cartouche\<close> by\<close>
  by (simp only: refl) (* trailing *)

lemma ‹∀x. ‹x› = x› ― ‹rendered cartouche›
  by simp

lemma "?x = ?x" and "'a = 'a" using foo.bar_baz(1-2) [where x = "y", OF c] by -

ML \<open>val x = "lemma in ML is not a command"\<close>

text {* verbatim with lemma inside *}

lemma "`a` = b" -- "old comment" by simp

end
