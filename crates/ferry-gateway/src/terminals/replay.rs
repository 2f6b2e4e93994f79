//! The last output a terminal forwarded, kept so that a page reattaching after a reload
//! shows the screen again: a ring of at most a fixed number of bytes.

use std::collections::VecDeque;

use bytes::Bytes;

/// The newest `capacity` bytes of output.
pub(crate) struct Replay {
    bytes: VecDeque<u8>,
    capacity: usize,
}

impl Replay {
    /// An empty ring holding at most `capacity` bytes.
    pub(crate) fn new(capacity: usize) -> Replay {
        Replay {
            bytes: VecDeque::new(),
            capacity,
        }
    }

    /// Adds output; the oldest bytes past the capacity are dropped.
    pub(crate) fn push(&mut self, output: &[u8]) {
        let output = &output[output.len().saturating_sub(self.capacity)..];
        let over = (self.bytes.len() + output.len()).saturating_sub(self.capacity);
        self.bytes.drain(..over);
        self.bytes.extend(output);
    }

    /// What is kept, oldest first, in at most two pieces.
    pub(crate) fn pieces(&self) -> impl Iterator<Item = Bytes> + '_ {
        let (front, back) = self.bytes.as_slices();
        [front, back]
            .into_iter()
            .filter(|piece| !piece.is_empty())
            .map(Bytes::copy_from_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(replay: &Replay) -> Vec<u8> {
        replay.pieces().flat_map(|b| b.to_vec()).collect()
    }

    #[test]
    fn the_ring_keeps_the_newest_bytes_at_its_bounds() {
        let mut replay = Replay::new(8);
        assert!(kept(&replay).is_empty());
        replay.push(b"abcdefg");
        assert_eq!(kept(&replay), b"abcdefg", "capacity - 1");
        replay.push(b"h");
        assert_eq!(kept(&replay), b"abcdefgh", "capacity");
        replay.push(b"i");
        assert_eq!(kept(&replay), b"bcdefghi", "capacity + 1");
        replay.push(b"0123456789");
        assert_eq!(kept(&replay), b"23456789", "one piece past the capacity");
        assert_eq!(replay.bytes.len(), 8);
    }
}
