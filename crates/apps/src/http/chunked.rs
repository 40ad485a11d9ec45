//! Decoding the chunked transfer coding (RFC 9112 7.1), incrementally: the
//! input may be cut anywhere.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Hex digits of a chunk size (`digits` so far).
    Size {
        digits: u8,
    },
    /// A chunk extension, until the end of the line.
    Ext,
    /// The LF after the size line's CR.
    SizeLf,
    Data,
    DataCr,
    DataLf,
    /// The start of a trailer line (or of the final empty line).
    TrailerStart,
    TrailerLine,
    TrailerLf,
    Done,
}

#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: State,
    /// The size of the chunk being read, then what is left of it.
    size: u64,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        ChunkedDecoder {
            state: State::Size { digits: 0 },
            size: 0,
        }
    }
}

impl ChunkedDecoder {
    pub fn new() -> Self {
        ChunkedDecoder::default()
    }

    /// The last chunk and the trailer section have been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes `input`, handing the data to `out`.  Returns how many bytes
    /// it took (all of them, unless the body ended inside `input`).
    pub fn decode(
        &mut self,
        input: &[u8],
        out: &mut dyn FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<usize, String> {
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            match self.state {
                State::Size { digits } => {
                    match b {
                        b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                            if digits >= 15 {
                                return Err("chunk size too large".into());
                            }
                            let d = (b as char).to_digit(16).unwrap_or(0);
                            self.size = self.size * 16 + u64::from(d);
                            self.state = State::Size { digits: digits + 1 };
                        }
                        _ if digits == 0 => return Err("chunk size expected".into()),
                        b';' | b' ' | b'\t' => self.state = State::Ext,
                        b'\r' => self.state = State::SizeLf,
                        b'\n' => self.size_line_done(),
                        _ => return Err("bad character in a chunk size".into()),
                    }
                    i += 1;
                }
                State::Ext => {
                    match b {
                        b'\r' => self.state = State::SizeLf,
                        b'\n' => self.size_line_done(),
                        _ => {}
                    }
                    i += 1;
                }
                State::SizeLf => {
                    if b != b'\n' {
                        return Err("CR without LF after a chunk size".into());
                    }
                    self.size_line_done();
                    i += 1;
                }
                State::Data => {
                    let n = (input.len() - i).min(self.size.min(usize::MAX as u64) as usize);
                    out(&input[i..i + n])?;
                    i += n;
                    self.size -= n as u64;
                    if self.size == 0 {
                        self.state = State::DataCr;
                    }
                }
                State::DataCr => {
                    match b {
                        b'\r' => self.state = State::DataLf,
                        b'\n' => self.state = State::Size { digits: 0 },
                        _ => return Err("chunk data longer than its size".into()),
                    }
                    i += 1;
                }
                State::DataLf => {
                    if b != b'\n' {
                        return Err("CR without LF after chunk data".into());
                    }
                    self.state = State::Size { digits: 0 };
                    i += 1;
                }
                State::TrailerStart => {
                    self.state = match b {
                        b'\r' => State::TrailerLf,
                        b'\n' => State::Done,
                        _ => State::TrailerLine,
                    };
                    i += 1;
                }
                State::TrailerLine => {
                    if b == b'\n' {
                        self.state = State::TrailerStart;
                    }
                    i += 1;
                }
                State::TrailerLf => {
                    if b != b'\n' {
                        return Err("CR without LF at the end of the trailer".into());
                    }
                    self.state = State::Done;
                    i += 1;
                }
                State::Done => break,
            }
        }
        Ok(i)
    }

    fn size_line_done(&mut self) {
        self.state = if self.size == 0 {
            State::TrailerStart
        } else {
            State::Data
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(pieces: &[&[u8]]) -> Result<(Vec<u8>, bool, usize), String> {
        let mut d = ChunkedDecoder::new();
        let mut out = Vec::new();
        let mut used = 0;
        for p in pieces {
            used += d.decode(p, &mut |b| {
                out.extend_from_slice(b);
                Ok(())
            })?;
        }
        Ok((out, d.is_done(), used))
    }

    #[test]
    fn decodes_split_anywhere() {
        let body =
            b"5\r\nhello\r\n6;name=\"v\"\r\n world\r\nA\nxxxxxxxxxx\n0\r\nX-Trailer: 1\r\n\r\nNEXT";
        let end = body.len() - 4;
        let expect = b"hello worldxxxxxxxxxx".to_vec();
        for i in 0..=body.len() {
            let (out, done, used) = decode_all(&[&body[..i], &body[i..]]).unwrap();
            assert_eq!(
                (out.as_slice(), done, used),
                (expect.as_slice(), true, end),
                "split at {i}"
            );
        }
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(decode_all(&bytes).unwrap(), (expect, true, end));
    }

    #[test]
    fn not_done_before_the_last_chunk() {
        let (out, done, _) = decode_all(&[b"3\r\nabc\r\n"]).unwrap();
        assert_eq!((out.as_slice(), done), (&b"abc"[..], false));
        let (_, done, _) = decode_all(&[b"3\r\nabc\r\n0\r\n"]).unwrap();
        assert!(!done, "the empty line after the last chunk is missing");
    }

    #[test]
    fn malformed() {
        for bad in [
            &b"\r\n"[..],
            b"g\r\n",
            b"5\rX",
            b"3\r\nabcd\r\n",
            b"3\r\nabc\rX",
            b"ffffffffffffffff\r\n",
            b"0\r\n\rX",
        ] {
            assert!(
                decode_all(&[bad]).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn output_errors_stop_decoding() {
        let mut d = ChunkedDecoder::new();
        let r = d.decode(b"3\r\nabc\r\n", &mut |_| Err("disk full".into()));
        assert_eq!(r, Err("disk full".to_string()));
    }
}
