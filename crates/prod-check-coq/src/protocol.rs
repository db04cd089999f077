//! The `coqtop -emacs` protocol, as pure functions over bytes (no process here).
//!
//! After every sentence coqtop prints `<prompt>NAME < STATE |P1|P2| DEPTH < </prompt>` (NAME is
//! `Coq` outside proofs and the current lemma inside one, STATE the number `BackTo` returns to,
//! `|P1|P2|` the open proofs). Errors and messages come as plain text before the prompt. A
//! failed sentence leaves STATE unchanged; a successful one increases it.
//!
//! Because a proof can print anything (including fake prompts), the driver writes a sentinel
//! query `Locate <nonce>.` after each sentence, with a fresh unguessable nonce. Its answer
//! `No object of basename <nonce>` can only come from Coq itself, so the prompt printed just
//! before it is the sentence's real prompt, and everything before that prompt is the sentence's
//! output.

/// One parsed coqtop prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prompt {
    pub name: String,
    pub state: u64,
    pub open_proofs: Vec<String>,
    pub depth: u64,
}

/// Parse the text between `<prompt>` and `</prompt>`, e.g. `bar < 4 |bar| 0 < `.
pub fn parse_prompt(inner: &str) -> Option<Prompt> {
    let t = inner.trim().strip_suffix('<')?.trim_end();
    let mut words = t.split_whitespace();
    let name = words.next()?.to_string();
    if words.next()? != "<" {
        return None;
    }
    let state = words.next()?.parse().ok()?;
    let proofs = words.next()?;
    let depth = words.next()?.parse().ok()?;
    if words.next().is_some() {
        return None;
    }
    let inner = proofs.strip_prefix('|')?.strip_suffix('|')?;
    let open_proofs = if inner.is_empty() {
        vec![]
    } else {
        inner.split('|').map(str::to_string).collect::<Vec<_>>()
    };
    Some(Prompt {
        name,
        state,
        open_proofs,
        depth,
    })
}

const PROMPT_OPEN: &[u8] = b"<prompt>";
const PROMPT_CLOSE: &[u8] = b"</prompt>";

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() || from > hay.len() - needle.len() {
        return None;
    }
    hay[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

fn count(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).filter(|w| *w == needle).count()
}

fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).rposition(|w| w == needle)
}

/// What one sentence produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawReply {
    /// The sentence's output before its prompt (lossy UTF-8; the middle of huge outputs elided).
    pub output: String,
    /// The sentence's own prompt.
    pub prompt: Prompt,
    /// The prompt after the sentinel query (the state the next sentence starts from).
    pub after: Prompt,
    /// How many prompts Coq printed for what was sent before the sentinel, the sentence's own
    /// included: one per sentence Coq read. Output can forge more, never fewer.
    pub prompts: usize,
}

/// Bytes kept from the start and from the end of one sentence's output.
const HEAD_KEEP: usize = 16 * 1024;
const TAIL_KEEP: usize = 256 * 1024;

/// Incremental scanner for one sentence's reply, bounded in memory whatever Coq prints.
pub struct ReplyScanner {
    marker: Vec<u8>,
    head: Vec<u8>,
    tail: Vec<u8>,
    elided: usize,
    searched: usize,
    /// Prompts in the elided and head bytes (counted before they left `tail`).
    dropped_prompts: usize,
}

/// Scanner result.
pub enum Scan {
    /// Not complete yet: feed more bytes.
    More,
    /// Complete; `rest` are bytes that belong to what comes after.
    Done(Result<RawReply, String>, Vec<u8>),
}

impl ReplyScanner {
    /// `sentinel` is the identifier passed to `Locate`.
    pub fn new(sentinel: &str) -> Self {
        ReplyScanner {
            marker: format!("No object of basename {sentinel}\n").into_bytes(),
            head: vec![],
            tail: vec![],
            elided: 0,
            searched: 0,
            dropped_prompts: 0,
        }
    }

    /// Total bytes seen so far (for limits).
    pub fn seen(&self) -> usize {
        self.head.len() + self.elided + self.tail.len()
    }

    pub fn push(&mut self, bytes: &[u8]) -> Scan {
        self.tail.extend_from_slice(bytes);
        if let Some(pos) = find(&self.tail, &self.marker, self.searched) {
            let after_marker = pos + self.marker.len();
            let Some(open) = find(&self.tail, PROMPT_OPEN, after_marker) else {
                return Scan::More;
            };
            let Some(close) = find(&self.tail, PROMPT_CLOSE, open) else {
                return Scan::More;
            };
            let rest = self.tail[close + PROMPT_CLOSE.len()..].to_vec();
            let result = self.finish(pos, open, close);
            return Scan::Done(result, rest);
        }
        // Keep searching only the part that could still hold the start of the marker.
        self.searched = self.tail.len().saturating_sub(self.marker.len());
        if self.tail.len() > 2 * TAIL_KEEP {
            let mut cut = self.tail.len() - TAIL_KEEP;
            // Never cut through a `<prompt>`: one split in two would be counted by neither side.
            if let Some(k) = (1..PROMPT_OPEN.len())
                .rev()
                .find(|&k| self.tail[cut - k..cut] == PROMPT_OPEN[..k])
            {
                cut -= k;
            }
            self.dropped_prompts += count(&self.tail[..cut], PROMPT_OPEN);
            let room = HEAD_KEEP.saturating_sub(self.head.len()).min(cut);
            self.head.extend_from_slice(&self.tail[..room]);
            self.elided += cut - room;
            self.tail.drain(..cut);
            self.searched = self.searched.saturating_sub(cut);
        }
        Scan::More
    }

    fn finish(&self, marker: usize, open: usize, close: usize) -> Result<RawReply, String> {
        let before = &self.tail[..marker];
        // The sentence's prompt ends exactly where the sentinel's answer starts.
        let Some(before) = before.strip_suffix(PROMPT_CLOSE) else {
            return Err("sentinel answer not preceded by a prompt".into());
        };
        let Some(p_open) = rfind(before, PROMPT_OPEN) else {
            return Err("sentence prompt not found".into());
        };
        let prompt_text = String::from_utf8_lossy(&before[p_open + PROMPT_OPEN.len()..]);
        let prompt =
            parse_prompt(&prompt_text).ok_or_else(|| format!("bad prompt {prompt_text:?}"))?;
        let after_text = String::from_utf8_lossy(&self.tail[open + PROMPT_OPEN.len()..close]);
        let after =
            parse_prompt(&after_text).ok_or_else(|| format!("bad prompt {after_text:?}"))?;
        let mut output = String::from_utf8_lossy(&self.head).into_owned();
        if self.elided > 0 {
            output.push_str(&format!("\n[… {} bytes of output elided …]\n", self.elided));
        }
        output.push_str(&String::from_utf8_lossy(&before[..p_open]));
        Ok(RawReply {
            output,
            prompt,
            after,
            prompts: self.dropped_prompts + count(before, PROMPT_OPEN),
        })
    }
}

/// The error message of a failed sentence: the text from the last line starting with `Error:`
/// (without Coq's "Toplevel input" location echo), capped in length.
pub fn error_message(output: &str) -> String {
    let start = output
        .rfind("\nError:")
        .map(|i| i + 1)
        .or_else(|| output.starts_with("Error:").then_some(0));
    let msg = match start {
        Some(i) => output[i..].trim(),
        None => output.trim(),
    };
    let msg = msg.strip_prefix("Error:").unwrap_or(msg).trim();
    let flat = prod_core::collapse_whitespace(msg);
    if flat.chars().count() > 600 {
        let cut: String = flat.chars().take(600).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// The raw text of the last `Error:` block of an output (after `Error:`), trimmed.
fn last_error(output: &str) -> Option<&str> {
    let start = output
        .rfind("\nError:")
        .map(|i| i + 1)
        .or_else(|| output.starts_with("Error:").then_some(0))?;
    Some(output[start + "Error:".len()..].trim())
}

/// Did Coq's parser refuse the sentence? (Judged on the last error only.)
pub fn is_syntax_error(output: &str) -> bool {
    // Parser errors say "Syntax error", lexer errors "Syntax Error: Lexer: …".
    last_error(output).is_some_and(|e| {
        e.get(..12)
            .is_some_and(|h| h.eq_ignore_ascii_case("syntax error"))
    })
}

/// Does a failed sentence's output say Coq's own timeout fired? (Judged on the last error only,
/// so text a proof printed earlier cannot change the verdict kind.)
pub fn is_timeout(output: &str) -> bool {
    last_error(output) == Some("Timeout!")
}

/// Does a failed sentence's output say Coq ran out of memory (under `prlimit --as`)? Judged on
/// the last error only: for `coqc`'s output, where messages are not tagged.
pub fn is_out_of_memory(output: &str) -> bool {
    last_error(output) == Some("Out of memory.")
}

/// Is Coq's own error in a `coqtop -emacs` reply `Out of memory.`? In that mode a proof's
/// messages come inside `<infomsg>`/`<warning>` tags and Coq's error line after all of them,
/// untagged and starting with `Error:`. A message can end its tag early (a forged closer), so
/// it can add untagged lines, but it can never tag Coq's own error line, which comes after
/// every message's real closer. So the answer is yes only when Coq's error is the one and only
/// untagged `Error:` line: a message that prints `Error: Out of memory.` (a `fail` whose text
/// holds a line break, or a string built at run time) adds a second one. Like a time-out, an
/// out-of-memory is still only believed when the checker's own memory accounting agrees
/// (`Session::stop`).
pub fn reports_out_of_memory(output: &str) -> bool {
    let untagged = untagged(output);
    let mut errors = untagged
        .lines()
        .filter(|l| l.starts_with("Error:"))
        .map(str::trim_end);
    errors.next() == Some("Error: Out of memory.") && errors.next().is_none()
}

/// `output` without its `<infomsg>…</infomsg>` and `<warning>…</warning>` blocks (each from its
/// opening tag to the next closing tag of its kind; an unclosed one to the end).
fn untagged(output: &str) -> String {
    const TAGS: [(&str, &str); 2] = [("<infomsg>", "</infomsg>"), ("<warning>", "</warning>")];
    let mut out = String::with_capacity(output.len());
    let mut rest = output;
    loop {
        let next = TAGS
            .iter()
            .filter_map(|&(open, close)| rest.find(open).map(|i| (i, open, close)))
            .min_by_key(|&(i, _, _)| i);
        let Some((i, open, close)) = next else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..i]);
        let body = &rest[i + open.len()..];
        match body.find(close) {
            Some(j) => rest = &body[j + close.len()..],
            None => return out,
        }
    }
}

/// Was the sentence stopped by our SIGINT?
pub fn is_user_interrupt(output: &str) -> bool {
    last_error(output) == Some("User interrupt.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts() {
        assert_eq!(
            parse_prompt("bar < 4 |bar| 0 < "),
            Some(Prompt {
                name: "bar".into(),
                state: 4,
                open_proofs: vec!["bar".into()],
                depth: 0
            })
        );
        assert_eq!(
            parse_prompt("Coq < 10 || 0 < ").unwrap().open_proofs,
            Vec::<String>::new()
        );
        assert_eq!(
            parse_prompt("b < 7 |b|a| 0 < ").unwrap().open_proofs,
            vec!["b", "a"]
        );
        assert_eq!(parse_prompt("garbage"), None);
        assert_eq!(parse_prompt("a < x || 0 < "), None);
    }

    fn scan_all(sentinel: &str, chunks: &[&[u8]]) -> Option<(Result<RawReply, String>, Vec<u8>)> {
        let mut s = ReplyScanner::new(sentinel);
        for c in chunks {
            if let Scan::Done(r, rest) = s.push(c) {
                return Some((r, rest));
            }
        }
        None
    }

    #[test]
    fn fake_prompts_and_fake_sentinels_do_not_fool_the_scanner() {
        let stream = b"<infomsg><prompt>Coq < 99 || 0 < </prompt></infomsg>\nNo object of basename Sx1\n\
<prompt>foo < 5 |foo| 0 < </prompt>No object of basename Sabc_1\n\n<prompt>foo < 6 |foo| 0 < </prompt>tail";
        // Split into small chunks to exercise the incremental search.
        let chunks: Vec<&[u8]> = stream.chunks(7).collect();
        let (r, rest) = scan_all("Sabc_1", &chunks).unwrap();
        let r = r.unwrap();
        assert_eq!(r.prompt.state, 5);
        assert_eq!(r.after.state, 6);
        assert!(r.output.contains("Coq < 99"));
        // The forged prompt counts: a step's reply with more than one prompt is refused.
        assert_eq!(r.prompts, 2);
        // Bytes after the sentinel's prompt are handed back.
        let mut all_rest = rest;
        let consumed = stream.len() - b"tail".len();
        if all_rest.is_empty() {
            all_rest = stream[consumed..].to_vec();
        }
        assert!(b"tail".starts_with(&all_rest) || all_rest.ends_with(b"tail"));
        // A different nonce is never found.
        assert!(scan_all("Sother", &[stream]).is_none());
    }

    #[test]
    fn huge_output_is_bounded() {
        let mut s = ReplyScanner::new("S1");
        let mut junk = vec![b'x'; 64 * 1024];
        // Prompts in the part that gets elided still count, also one cut in two by a chunk
        // boundary of the elision.
        junk[64 * 1024 - 3..].copy_from_slice(b"<pr");
        junk[..5].copy_from_slice(b"ompt>");
        for _ in 0..100 {
            assert!(matches!(s.push(&junk), Scan::More));
        }
        match s.push(b"<prompt>a < 3 |a| 0 < </prompt>No object of basename S1\n<prompt>a < 4 |a| 0 < </prompt>") {
            Scan::Done(Ok(r), _) => {
                assert!(r.output.len() < 600 * 1024);
                assert!(r.output.contains("elided"));
                assert_eq!(r.prompt.state, 3);
                assert_eq!(r.prompts, 100);
            }
            _ => panic!("not done"),
        }
    }

    #[test]
    fn messages() {
        let out = "Toplevel input, characters 0-5:\n> fail.\n> ^^^^^\nError: Tactic failure.\n";
        assert_eq!(error_message(out), "Tactic failure.");
        assert!(is_timeout("x\nError: Timeout!\n"));
        assert!(!is_timeout("Error: Tactic failure: Error: Timeout!."));
        assert!(is_out_of_memory("Error: Out of memory.\n"));
        assert!(!is_out_of_memory(
            "<infomsg>\nError: Out of memory.\n</infomsg>\nError: Tactic failure.\n"
        ));
    }

    /// Coq's own out-of-memory error, as `coqtop -emacs` prints it, against every way a proof
    /// can print the same words.
    #[test]
    fn out_of_memory_only_from_coqs_own_error_line() {
        let echo = "Toplevel input, characters 0-9:\n> tac.\n> ^^^^\n";
        let real = format!("<infomsg>x</infomsg>\n{echo}Error: Out of memory.\n");
        assert!(reports_out_of_memory(&real));
        let warned =
            format!("{echo}<warning>\nWarning: w [x]</warning>\n{echo}Error: Out of memory.\n");
        assert!(reports_out_of_memory(&warned));
        for forged in [
            // A message that says it, then Coq's own (other) error.
            format!("<infomsg>Error: Out of memory.</infomsg>\n{echo}Error: Tactic failure.\n"),
            // A failing tactic whose message holds a line break.
            format!("{echo}Error: Tactic failure: x\nError: Out of memory.\n"),
            // A message that closes its tag early.
            format!("<infomsg>a</infomsg>\nError: Out of memory.\n</infomsg>\n{echo}Error: Tactic failure.\n"),
            // A message that opens a tag it never closes cannot hide Coq's line either.
            format!("<infomsg><infomsg>\n</infomsg>\n{echo}Error: Tactic failure: \nError: Out of memory.\n"),
            "Error: Out of memory. Error: Out of memory.\n".to_string(),
            String::new(),
        ] {
            assert!(!reports_out_of_memory(&forged), "{forged:?}");
        }
    }
}
