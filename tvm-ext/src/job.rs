//! Errors raised inside kernel jobs, which may run on rayon's threads.
//!
//! `tvm_ffi::Error` is not `Send`, so a job reports a [`JobError`] (a message
//! and where it was raised) and the kernel's entry point turns it into an
//! internal error with [`internal`]: such an error is a planning bug, never
//! the caller's mistake.
use tvm_ffi::INTERNAL_ERROR;

/// An error raised inside a (possibly parallel) kernel job.
#[derive(Debug)]
pub(crate) struct JobError {
    pub message: String,
    /// Where the error was raised, `file:line`.
    pub at: String,
}

impl JobError {
    /// An error raised at the caller's location.
    #[track_caller]
    pub fn new(message: impl Into<String>) -> Self {
        let at = std::panic::Location::caller();
        Self {
            message: message.into(),
            at: format!("{}:{}", at.file(), at.line()),
        }
    }
}

/// Turns a [`JobError`] into an internal error of the function `who`.
pub(crate) fn internal(who: &str, e: JobError) -> tvm_ffi::Error {
    let context = String::new();
    tvm_ffi::Error::new(
        INTERNAL_ERROR,
        &format!("{who}: internal error: {} (at {})", e.message, e.at),
        &context,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_errors_say_where_the_job_failed() {
        let line = line!() + 1;
        let e = internal("k", JobError::new("range 3+4 outside a buffer of 5"));
        assert_eq!(e.kind(), INTERNAL_ERROR);
        let want = format!(
            "k: internal error: range 3+4 outside a buffer of 5 (at {}:{line})",
            file!()
        );
        assert_eq!(e.message(), want);
    }
}
