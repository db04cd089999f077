//! Byte framing of the Isabelle server protocol (system manual, "Byte messages" and "Input and
//! output messages"; `shared/isabelle/reference/Server.thy`).
//!
//! * A short message is one line without CR/LF, ended by LF or CR-LF.
//! * A long message is a line of decimal digits `N`, then exactly `N` bytes; a final line
//!   terminator may be part of those bytes or may follow them (both are accepted).
//!   The real server (Isabelle/Scala `Byte_Message.write_line_message`) sends every message of
//!   more than 100 bytes, or with a line break, as `N+1` (LF included) followed by the text and LF;
//!   the recorded replies in `shared/isabelle/server-replies` have exactly that shape.
//! * A message is `name argument`: the name is the longest prefix of ASCII letters, digits, `_`
//!   and `.`, then the longest run of ASCII blanks, then the argument (possibly empty).

use std::io::{self, BufRead, Write};

/// Longest message accepted (bytes): a bound against a corrupt or hostile length line.
pub const MAX_MESSAGE_BYTES: usize = 1 << 30;

/// Longest length line accepted (digits): anything longer is not a length.
const MAX_LENGTH_DIGITS: usize = 10;

/// Read one message (its bytes, without the line terminator). `Ok(None)` at a clean end of
/// stream (no partial message). Empty lines between messages are skipped: they are the optional
/// terminator after a length-prefixed block that did not include one.
pub fn read_message(r: &mut impl BufRead) -> io::Result<Option<Vec<u8>>> {
    loop {
        let mut line = Vec::new();
        let n = r.read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(None);
        }
        let ended = line.last() == Some(&b'\n');
        trim_terminator(&mut line);
        if !ended && !line.is_empty() {
            // A message must end with a line terminator; the stream ended in the middle.
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed in the middle of a message",
            ));
        }
        if line.is_empty() {
            if !ended {
                return Ok(None);
            }
            continue;
        }
        if line.len() <= MAX_LENGTH_DIGITS && line.iter().all(u8::is_ascii_digit) {
            let len: usize = std::str::from_utf8(&line)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad length line"))?;
            if len > MAX_MESSAGE_BYTES {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "message of {len} bytes is longer than the {MAX_MESSAGE_BYTES} accepted"
                    ),
                ));
            }
            let mut block = vec![0u8; len];
            r.read_exact(&mut block)?;
            trim_terminator(&mut block);
            return Ok(Some(block));
        }
        return Ok(Some(line));
    }
}

fn trim_terminator(b: &mut Vec<u8>) {
    if b.last() == Some(&b'\n') {
        b.pop();
        if b.last() == Some(&b'\r') {
            b.pop();
        }
    }
}

/// Write one message the way Isabelle/Scala does: as a single line when it is at most 100 bytes
/// and has no line break, else length-prefixed (the length counts the final LF).
pub fn write_message(w: &mut impl Write, msg: &[u8]) -> io::Result<()> {
    let mut out = Vec::with_capacity(msg.len() + 16);
    if msg.len() > 100 || msg.contains(&b'\n') || msg.contains(&b'\r') {
        out.extend_from_slice(format!("{}\n", msg.len() + 1).as_bytes());
    }
    out.extend_from_slice(msg);
    out.push(b'\n');
    w.write_all(&out)?;
    w.flush()
}

/// A short message (the password line): it may not contain a line break.
pub fn write_line(w: &mut impl Write, line: &str) -> io::Result<()> {
    if line.contains(['\n', '\r']) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a short message may not contain a line break",
        ));
    }
    w.write_all(line.as_bytes())?;
    w.write_all(b"\n")?;
    w.flush()
}

/// A message split into `name` and `argument` (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub name: String,
    pub argument: String,
}

impl Message {
    /// Split a message. Invalid UTF-8 is replaced (the server only sends UTF-8).
    pub fn parse(bytes: &[u8]) -> Message {
        let text = String::from_utf8_lossy(bytes);
        let name_end = text
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(text.len());
        let rest = &text[name_end..];
        let argument = rest.trim_start_matches([' ', '\t']);
        Message {
            name: text[..name_end].to_string(),
            argument: argument.to_string(),
        }
    }

    /// The argument as JSON (`Null` for an empty argument).
    pub fn json(&self) -> Result<serde_json::Value, serde_json::Error> {
        if self.argument.trim().is_empty() {
            Ok(serde_json::Value::Null)
        } else {
            serde_json::from_str(&self.argument)
        }
    }
}

/// Render a command: `name` alone, or `name argument`.
pub fn command_text(name: &str, argument: Option<&serde_json::Value>) -> String {
    match argument {
        None => name.to_string(),
        Some(a) => format!("{name} {a}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufReader, Read};

    /// A reader that hands out at most `chunk` bytes per call (split TCP reads).
    struct Trickle<'a> {
        data: &'a [u8],
        chunk: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.chunk.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn all(data: &[u8], chunk: usize) -> io::Result<Vec<Vec<u8>>> {
        let mut r = BufReader::with_capacity(3, Trickle { data, chunk });
        let mut out = vec![];
        while let Some(m) = read_message(&mut r)? {
            out.push(m);
        }
        Ok(out)
    }

    #[test]
    fn short_long_and_terminators() {
        // Long block with its LF counted (the server's form), one without LF followed by an
        // explicit terminator, one without any terminator, CR-LF short lines.
        let data = b"OK {\"task\":\"a\"}\r\n12\nNOTE {\"x\":1}\n5\nHELLO\nFINISHED {}\n3\nabc4\nabcdERROR \"x\"\r\n";
        for chunk in [1, 2, 3, 7, 1000] {
            let got = all(data, chunk).unwrap();
            let got: Vec<String> = got
                .iter()
                .map(|m| String::from_utf8_lossy(m).into())
                .collect();
            assert_eq!(
                got,
                [
                    "OK {\"task\":\"a\"}",
                    "NOTE {\"x\":1}",
                    "HELLO",
                    "FINISHED {}",
                    "abc",
                    "abcd",
                    "ERROR \"x\"",
                ],
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn long_message_with_inner_line_breaks_and_utf8() {
        let body = "FINISHED {\"m\":\"a\nb ∀\"}";
        let mut buf = vec![];
        write_message(&mut buf, body.as_bytes()).unwrap();
        assert!(buf.starts_with(format!("{}\n", body.len() + 1).as_bytes()));
        let got = all(&buf, 1).unwrap();
        assert_eq!(got, vec![body.as_bytes().to_vec()]);
        // A message of 100 bytes is a plain line, 101 is length-prefixed.
        let mut short = vec![];
        write_message(&mut short, &[b'a'; 100]).unwrap();
        assert_eq!(short.len(), 101);
        let mut long = vec![];
        write_message(&mut long, &[b'a'; 101]).unwrap();
        assert!(long.starts_with(b"102\n"));
    }

    #[test]
    fn truncated_streams_are_errors_not_panics() {
        assert!(all(b"10\nabc", 2).is_err());
        assert!(all(b"OK {\"a\"", 2).is_err());
        assert!(all(b"99999999999\n", 2).is_ok()); // not a length (too many digits): a short message
        assert!(all(b"2000000000\n", 2).is_err()); // a length beyond the bound
        assert_eq!(all(b"", 1).unwrap().len(), 0);
        assert_eq!(all(b"\n\n", 1).unwrap().len(), 0);
    }

    #[test]
    fn name_and_argument() {
        let m = Message::parse(b"OK {\"task\":\"x\"}");
        assert_eq!(
            (m.name.as_str(), m.argument.as_str()),
            ("OK", "{\"task\":\"x\"}")
        );
        let m = Message::parse(b"OK");
        assert_eq!((m.name.as_str(), m.argument.as_str()), ("OK", ""));
        assert_eq!(m.json().unwrap(), serde_json::Value::Null);
        let m = Message::parse(b"ERROR\"Bad command 'unknown'\"");
        assert_eq!(m.name, "ERROR");
        assert_eq!(
            m.json().unwrap(),
            serde_json::json!("Bad command 'unknown'")
        );
        let m = Message::parse(b"session_start.x  \t [1]");
        assert_eq!(
            (m.name.as_str(), m.argument.as_str()),
            ("session_start.x", "[1]")
        );
    }

    proptest::proptest! {
        #[test]
        fn any_messages_round_trip(msgs in proptest::collection::vec("[^\r]{1,300}", 1..6), chunk in 1usize..50) {
            // Empty-after-trim lines are not messages; the server never sends them.
            let msgs: Vec<String> = msgs.into_iter().filter(|m| !m.is_empty() && !m.ends_with('\n')).collect();
            // A short message that is all digits would read as a length line: the writer never
            // produces one for JSON replies, so skip such inputs (before decoding: the misread
            // length may cut a character in two).
            proptest::prop_assume!(msgs.iter().all(|m| m.contains('\n') || m.len() > 100 || !m.bytes().all(|b| b.is_ascii_digit())));
            let mut buf = vec![];
            for m in &msgs {
                write_message(&mut buf, m.as_bytes()).unwrap();
            }
            let got = all(&buf, chunk).unwrap();
            let got: Vec<String> = got.iter().map(|m| String::from_utf8(m.clone()).unwrap()).collect();
            proptest::prop_assert_eq!(got, msgs);
        }
    }
}
