//! Where one cluster's output for the human goes while `apply` or `watch` works on it: straight
//! to stdout and stderr (one cluster at a time, progress shown as it happens), or into a buffer
//! printed in one piece when the cluster is done (clusters worked on at once), so that the
//! lines of two clusters never interleave and clusters are shown in a stable order.
//!
//! Every line still leaves through [`crate::output`] (redacted, control characters escaped).

use std::sync::{Arc, Mutex};

use crate::output;

/// One buffered piece of output.
#[derive(Debug)]
pub(crate) enum Piece {
    /// Text for stdout, with its own newlines (as `out!`).
    Out(String),
    /// One line for stderr (as `errln!`).
    Err(String),
}

/// One cluster's output: live, or buffered until [`Sink::flush`].
#[derive(Debug, Clone)]
pub(crate) enum Sink {
    Live,
    Buffer(Arc<Mutex<Vec<Piece>>>),
}

impl Sink {
    /// Output printed as it comes.
    pub(crate) fn live() -> Sink {
        Sink::Live
    }

    /// Output kept until [`Sink::flush`].
    pub(crate) fn buffer() -> Sink {
        Sink::Buffer(Arc::default())
    }

    /// Printed as it comes (a progress bar makes sense).
    pub(crate) fn is_live(&self) -> bool {
        matches!(self, Sink::Live)
    }

    fn push(&self, piece: Piece) {
        match self {
            Sink::Live => match piece {
                Piece::Out(text) => output::out_text(&text),
                Piece::Err(line) => output::err_line(&line),
            },
            Sink::Buffer(pieces) => pieces.lock().unwrap_or_else(|e| e.into_inner()).push(piece),
        }
    }

    /// `out!`: text for stdout, with its own newlines.
    pub(crate) fn out(&self, text: impl Into<String>) {
        self.push(Piece::Out(text.into()));
    }

    /// `outln!`: one line for stdout.
    pub(crate) fn outln(&self, line: impl Into<String>) {
        let mut text = line.into();
        text.push('\n');
        self.push(Piece::Out(text));
    }

    /// `errln!`: one line for stderr.
    pub(crate) fn errln(&self, line: impl Into<String>) {
        self.push(Piece::Err(line.into()));
    }

    /// A line for the human: stdout, or stderr when stdout carries JSON (`quiet`).
    pub(crate) fn say(&self, quiet: bool, line: impl Into<String>) {
        if quiet {
            self.errln(line);
        } else {
            self.outln(line);
        }
    }

    /// Print what was buffered, in order, and forget it (nothing to do when live).
    pub(crate) fn flush(&self) {
        let Sink::Buffer(pieces) = self else {
            return;
        };
        let pieces = std::mem::take(&mut *pieces.lock().unwrap_or_else(|e| e.into_inner()));
        for piece in pieces {
            match piece {
                Piece::Out(text) => output::out_text(&text),
                Piece::Err(line) => output::err_line(&line),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_keeps_its_pieces_in_order_until_flushed() {
        let sink = Sink::buffer();
        sink.outln("a");
        sink.errln("b");
        sink.out("c\nd\n");
        let Sink::Buffer(pieces) = &sink else {
            panic!("a buffer");
        };
        let got: Vec<String> = pieces
            .lock()
            .unwrap()
            .iter()
            .map(|p| format!("{p:?}"))
            .collect();
        assert_eq!(got, [r#"Out("a\n")"#, r#"Err("b")"#, r#"Out("c\nd\n")"#]);
        sink.flush();
        assert!(pieces.lock().unwrap().is_empty());
        assert!(!sink.is_live() && Sink::live().is_live());
    }
}
