//! Finding an object's names: each instance key is looked up among the names the schema
//! mentions, by a guess in the schema's order, a scan, a perfect hash ([`Table`]) or a probing
//! index ([`Index`]), all built at compile time.

use super::*;

/// A name's length with its first and last 8 bytes (or 4, or single bytes, overlapping when the
/// name is short): two names of at most 16 bytes are equal exactly when their keys are; longer
/// ones also need their bytes compared. It is what the property table and index hash and compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Key {
    pub(super) len: usize,
    pub(super) head: u64,
    pub(super) tail: u64,
}

impl Key {
    #[inline(always)]
    pub(super) fn of(name: &str) -> Key {
        let b = name.as_bytes();
        let n = b.len();
        // Most names are 8 bytes or longer: that case is tested first.
        let (head, tail) = if n >= 8 {
            (word8(b, 0), word8(b, n - 8))
        } else if n >= 4 {
            (u64::from(word4(b, 0)), u64::from(word4(b, n - 4)))
        } else if n > 0 {
            (
                u64::from(b[0]) | u64::from(b[n / 2]) << 8 | u64::from(b[n - 1]) << 16,
                0,
            )
        } else {
            (0, 0)
        };
        Key { len: n, head, tail }
    }

    /// Never the key of a name (no string is `usize::MAX` bytes long): an empty [`Table`] slot.
    pub(super) const NONE: Key = Key {
        len: usize::MAX,
        head: 0,
        tail: 0,
    };

    /// The three fields in one word, for [`Table`]'s multiplicative hash. The tail is rotated
    /// so that a name whose head and tail are the same word (8 bytes long) does not cancel out.
    #[inline(always)]
    pub(super) fn word(self) -> u64 {
        self.head ^ self.tail.rotate_left(32) ^ self.len as u64
    }

    /// A slot in a table of `size` (a power of two): the two words multiplied as 128 bits and
    /// folded (as wyhash mixes). Names whose head and tail are the same word (8 bytes long)
    /// still spread: an XOR of the two, as before, made `field_NN` collide in runs.
    #[inline(always)]
    pub(super) fn slot(self, size: usize) -> usize {
        let product = u128::from(self.head ^ 0xa076_1d64_78bd_642f)
            * u128::from(self.tail ^ self.len as u64 ^ 0xe703_7ed1_a0b4_28db);
        let folded = (product as u64) ^ ((product >> 64) as u64);
        (folded >> 32) as usize & (size - 1)
    }
}

/// A perfect hash of an object's names: a multiplier found at compile time sends each name's
/// [`Key::word`] to a slot of its own, so a lookup is one multiply, one probe and one key
/// comparison, with no loop and no guess, in whatever order the instance lists its keys.
#[derive(Debug, Clone)]
pub(super) struct Table {
    pub(super) multiplier: u64,
    /// 64 − log2 of the table size: the product's top bits pick the slot.
    pub(super) shift: u32,
    /// Each slot: a name's key, its position in the entry list and its rule (a lookup reads
    /// nothing else), or [`Key::NONE`].
    pub(super) slots: Vec<Slot>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    pub(super) key: Key,
    /// The entry's position, for a name longer than a key.
    pub(super) at: u32,
    pub(super) rule: Rule,
}

impl Slot {
    pub(super) const EMPTY: Slot = Slot {
        key: Key::NONE,
        at: 0,
        rule: Rule::NONE,
    };
}

impl Table {
    /// Multipliers tried for each table size before a larger one is tried.
    pub(super) const TRIES: u32 = 1024;
    /// Most names an object may have for a table (then at most 1,024 slots): a larger set is
    /// seldom separated within eight slots a name anyway.
    pub(super) const MAX_NAMES: usize = 128;

    /// The smallest table with at least 2 slots a name (then twice, four times as large) for
    /// which a multiplier sends every name to a slot of its own; none if no size has one (a
    /// large or unlucky set, or names longer than 16 bytes that share their key): then the
    /// entries go through an [`Index`]. Compile time only, and bounded: each try stops at the
    /// first collision.
    pub(super) fn new(list: &[Entry]) -> Option<Table> {
        if list.len() > Table::MAX_NAMES {
            return None;
        }
        let keys: Vec<Key> = list.iter().map(|e| Key::of(&e.name)).collect();
        // Two names with the same word share a slot whatever the multiplier.
        let mut words: Vec<u64> = keys.iter().map(|k| k.word()).collect();
        words.sort_unstable();
        if words.windows(2).any(|w| w[0] == w[1]) {
            return None;
        }
        let min_bits = (2 * list.len()).next_power_of_two().trailing_zeros();
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for bits in min_bits..min_bits + 3 {
            let shift = 64 - bits;
            let slot =
                |key: Key, multiplier: u64| (key.word().wrapping_mul(multiplier) >> shift) as usize;
            // The slots taken so far, one bit each: a try costs no more than its names.
            let mut taken = vec![0u64; (1usize << bits).div_ceil(64)];
            for _ in 0..Table::TRIES {
                // Odd multipliers from a fixed sequence: the same schema gets the same table.
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let multiplier = state | 1;
                taken.fill(0);
                let separates = keys.iter().all(|&key| {
                    let at = slot(key, multiplier);
                    let (word, bit) = (&mut taken[at / 64], 1 << (at % 64));
                    let free = *word & bit == 0;
                    *word |= bit;
                    free
                });
                if separates {
                    let mut slots = vec![Slot::EMPTY; 1 << bits];
                    for (at, (&key, entry)) in keys.iter().zip(list).enumerate() {
                        slots[slot(key, multiplier)] = Slot {
                            key,
                            at: u32::try_from(at).ok()?,
                            rule: entry.rule,
                        };
                    }
                    return Some(Table {
                        multiplier,
                        shift,
                        slots,
                    });
                }
            }
        }
        None
    }

    /// The rule for `name`, if it is one of the names; `list` is the entry list, for names
    /// longer than a key.
    #[inline(always)]
    pub(super) fn find(&self, list: &[Entry], name: &str) -> Option<&Rule> {
        let key = Key::of(name);
        let at = (key.word().wrapping_mul(self.multiplier) >> self.shift) as usize;
        let slot = self.slots.get(at)?;
        let same = slot.key == key
            && (key.len <= 16 || list.get(slot.at as usize).is_some_and(|e| e.name == name));
        same.then_some(&slot.rule)
    }
}

/// Name → position in an entry list, when no [`Table`] separates the names: open
/// addressing with linear probes, in a table at most a quarter full. Only the schema's own names
/// are ever inserted, at compile time: whatever keys an instance brings, a probe ends within the
/// runs those names made.
#[derive(Debug, Clone)]
pub(super) struct Index {
    /// Each slot: the entry's position + 1, or 0 when empty.
    pub(super) slots: Vec<usize>,
    /// The entries' keys, by position.
    pub(super) keys: Vec<Key>,
}

impl Index {
    pub(super) fn new(list: &[Entry]) -> Index {
        let keys: Vec<Key> = list.iter().map(|e| Key::of(&e.name)).collect();
        // At most a quarter full: a probe seldom goes past its first slot.
        let size = (4 * list.len()).next_power_of_two();
        let mut slots = vec![0; size];
        for (i, key) in keys.iter().enumerate() {
            let mut at = key.slot(size);
            while slots[at] != 0 {
                at = (at + 1) & (size - 1);
            }
            slots[at] = i + 1;
        }
        Index { slots, keys }
    }

    pub(super) fn get(&self, list: &[Entry], name: &str) -> Option<usize> {
        let key = Key::of(name);
        let size = self.slots.len();
        let mut at = key.slot(size);
        loop {
            let i = self.slots[at].checked_sub(1)?;
            if self.keys[i] == key && (key.len <= 16 || list[i].name == name) {
                return Some(i);
            }
            at = (at + 1) & (size - 1);
        }
    }
}

/// Up to this many entries, a lookup that missed the guess scans them; beyond, a lookup goes
/// through a [`Table`] (or, failing one, an [`Index`]).
pub(super) const SCAN_MAX: usize = 8;

/// The names an object schema mentions, for lookup by an instance's keys.
#[derive(Debug, Clone, Default)]
pub(super) struct Entries {
    /// Declared properties in the schema's order, then required names not declared.
    pub(super) list: Vec<Entry>,
    /// Name → rule, when the list is too long to scan: every lookup goes through it.
    pub(super) table: Option<Table>,
    /// Name → position in `list`, when the list is too long to scan and no table was found.
    pub(super) index: Option<Index>,
}

impl Entries {
    /// The entry for `name`, from the [`Table`] if there is one, else by [`Entries::guess`].
    #[inline(always)]
    pub(super) fn find(&self, name: &str, next: &mut usize) -> Option<&Rule> {
        match &self.table {
            Some(table) => table.find(&self.list, name),
            None => self.guess(name, next).map(|e| &e.rule),
        }
    }

    /// The entry for `name`, without a [`Table`]. Arguments usually list their properties in
    /// the schema's order, so the entry after the previous match (`next`) is tried first: then
    /// an object costs one string comparison per property, whatever its size.
    #[inline(always)]
    pub(super) fn guess(&self, name: &str, next: &mut usize) -> Option<&Entry> {
        if let Some(entry) = self.list.get(*next)
            && same_str(&entry.name, name)
        {
            *next += 1;
            return Some(entry);
        }
        self.search(name, next)
    }

    /// [`Entries::guess`] when the guess missed.
    #[inline(always)]
    pub(super) fn search(&self, name: &str, next: &mut usize) -> Option<&Entry> {
        let at = match &self.index {
            Some(index) => index.get(&self.list, name)?,
            None => self.list.iter().position(|e| same_str(&e.name, name))?,
        };
        *next = at + 1;
        Some(&self.list[at])
    }
}
