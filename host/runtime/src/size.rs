//! Approximate byte size of what a guest returns, for the output cap.

/// Bytes a value occupies once lifted out of the guest (strings count their length).
pub(crate) trait OutputSize {
    fn output_size(&self) -> usize;
}

impl OutputSize for String {
    fn output_size(&self) -> usize {
        self.len()
    }
}

impl OutputSize for bool {
    fn output_size(&self) -> usize {
        1
    }
}

impl OutputSize for () {
    fn output_size(&self) -> usize {
        0
    }
}

impl<T: OutputSize> OutputSize for Vec<T> {
    fn output_size(&self) -> usize {
        self.iter().map(OutputSize::output_size).sum::<usize>() + 8
    }
}

impl<T: OutputSize> OutputSize for Option<T> {
    fn output_size(&self) -> usize {
        self.as_ref().map_or(1, OutputSize::output_size)
    }
}

impl<T: OutputSize, E: OutputSize> OutputSize for Result<T, E> {
    fn output_size(&self) -> usize {
        match self {
            Ok(v) => v.output_size(),
            Err(e) => e.output_size(),
        }
    }
}

impl<A: OutputSize, B: OutputSize> OutputSize for (A, B) {
    fn output_size(&self) -> usize {
        self.0.output_size() + self.1.output_size()
    }
}

/// `impl OutputSize` for a record by summing the listed fields (other fields are fixed-size).
macro_rules! output_size {
    ($ty:ty { $($field:ident),* }) => {
        impl $crate::size::OutputSize for $ty {
            fn output_size(&self) -> usize {
                8 $(+ $crate::size::OutputSize::output_size(&self.$field))*
            }
        }
    };
}
pub(crate) use output_size;

/// The most characters of one guest message, summary or reason kept: a terminal line, not
/// the 10 MB a guest may return within its output cap.
pub const MAX_PROSE: usize = 1_000;

/// The most characters of a field path a guest names (diagnostics quote values at 200).
pub const MAX_PATH: usize = 200;

/// Cut `text` to `max` characters in place, saying how much was left out.
pub(crate) fn cut(text: &mut String, max: usize) {
    if let Some((at, _)) = text.char_indices().nth(max) {
        let left = text[at..].chars().count();
        text.truncate(at);
        text.push_str(&format!("… ({left} more characters)"));
    }
}

/// Guest text meant for people (messages, summaries, reasons, field paths), cut once when
/// the call returns ([`MAX_PROSE`], [`MAX_PATH`]) so that no rendering (text, markdown,
/// JSON, logs) prints more. Values (config, calls, manifests) are never cut.
pub(crate) trait Prose {
    fn bound_prose(&mut self);
}

/// [`Prose`] for types that carry no prose.
macro_rules! no_prose {
    ($($ty:ty),*) => {
        $(impl $crate::size::Prose for $ty {
            fn bound_prose(&mut self) {}
        })*
    };
}
pub(crate) use no_prose;

/// [`Prose`] for a record: `path` fields cut to [`MAX_PATH`], `text` fields to
/// [`MAX_PROSE`], `nested` fields bounded by their own impl.
macro_rules! prose {
    ($ty:ty { path: [$($path:ident),*], text: [$($text:ident),*], nested: [$($nested:ident),*] }) => {
        impl $crate::size::Prose for $ty {
            fn bound_prose(&mut self) {
                $($crate::size::cut(&mut self.$path, $crate::size::MAX_PATH);)*
                $($crate::size::cut(&mut self.$text, $crate::size::MAX_PROSE);)*
                $($crate::size::Prose::bound_prose(&mut self.$nested);)*
            }
        }
    };
}
pub(crate) use prose;

no_prose!(String, bool, ());

impl<T: Prose> Prose for Vec<T> {
    fn bound_prose(&mut self) {
        self.iter_mut().for_each(Prose::bound_prose);
    }
}

impl<T: Prose> Prose for Option<T> {
    fn bound_prose(&mut self) {
        if let Some(v) = self {
            v.bound_prose();
        }
    }
}

impl<T: Prose, E: Prose> Prose for Result<T, E> {
    fn bound_prose(&mut self) {
        match self {
            Ok(v) => v.bound_prose(),
            Err(e) => e.bound_prose(),
        }
    }
}
