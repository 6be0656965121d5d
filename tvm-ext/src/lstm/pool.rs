//! 64-byte aligned buffers, recycled through a small process-wide pool.
use super::*;

#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(super) struct Line([f32; 16]);

/// An f32 buffer aligned to 64 bytes. Large ones come from and go back to a
/// small process-wide pool: fresh pages cost a page fault each, which for the
/// megabyte-sized buffers of one call adds up to a noticeable share of it.
pub(super) struct AlignedBuf {
    lines: Vec<Line>,
    len: usize,
}

/// Buffers below this many floats are allocated directly.
pub(super) const POOL_MIN: usize = 1 << 14;
/// At most this many buffers, and this many floats in all, are kept.
pub(super) const POOL_BUFFERS: usize = 16;
pub(super) const POOL_FLOATS: usize = 1 << 26;

static POOL: std::sync::Mutex<Vec<Vec<Line>>> = std::sync::Mutex::new(Vec::new());

pub(super) fn pool() -> std::sync::MutexGuard<'static, Vec<Vec<Line>>> {
    POOL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl AlignedBuf {
    /// A buffer whose contents are unspecified (zeros or earlier data).
    pub(super) fn scratch(len: usize) -> Self {
        let n = len.div_ceil(16);
        let mut lines = Vec::new();
        if len >= POOL_MIN {
            let mut pool = pool();
            // The smallest kept buffer that is large enough.
            let best = (0..pool.len())
                .filter(|&i| pool[i].capacity() >= n)
                .min_by_key(|&i| pool[i].capacity());
            if let Some(i) = best {
                lines = pool.swap_remove(i);
            }
        }
        if lines.len() < n {
            lines.resize(n, Line([0.0; 16]));
        }
        lines.truncate(n);
        Self { lines, len }
    }

    pub(super) fn zeros(len: usize) -> Self {
        let mut buf = Self::scratch(len);
        buf.lines.fill(Line([0.0; 16]));
        buf
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len < POOL_MIN {
            return;
        }
        let lines = std::mem::take(&mut self.lines);
        let mut pool = pool();
        let kept: usize = pool.iter().map(|v| v.capacity() * 16).sum();
        if pool.len() < POOL_BUFFERS && kept + lines.capacity() * 16 <= POOL_FLOATS {
            pool.push(lines);
        }
    }
}

impl Deref for AlignedBuf {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        // SAFETY: `lines` holds at least `len` contiguous, initialised f32s.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr() as *const f32, self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [f32] {
        // SAFETY: as above, uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr() as *mut f32, self.len) }
    }
}
