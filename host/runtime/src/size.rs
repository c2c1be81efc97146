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
