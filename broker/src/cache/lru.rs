//! Slab-backed intrusive doubly-linked list giving O(1) LRU ordering.
//!
//! Values live in a `Vec` of slots addressed by [`SlotId`]; occupied slots
//! are linked from most- to least-recently used, vacant slots form a free
//! list that later insertions reuse. Every operation is O(1). The slab does
//! not shrink: its capacity tracks the peak number of entries in the shard.

/// Index of a slot in an [`LruSlab`].
pub(super) type SlotId = usize;

/// Marks the absence of a neighbour or of a free slot.
const NIL: SlotId = usize::MAX;

#[derive(Debug)]
struct Node<T> {
    value: T,
    /// Towards the most recently used end.
    prev: SlotId,
    /// Towards the least recently used end.
    next: SlotId,
}

#[derive(Debug)]
enum Slot<T> {
    Occupied(Node<T>),
    Vacant { next_free: SlotId },
}

/// Values in recency order: front = most recently used, back = least.
#[derive(Debug)]
pub(super) struct LruSlab<T> {
    slots: Vec<Slot<T>>,
    head: SlotId,
    tail: SlotId,
    free: SlotId,
    len: usize,
}

impl<T> Default for LruSlab<T> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            head: NIL,
            tail: NIL,
            free: NIL,
            len: 0,
        }
    }
}

impl<T> LruSlab<T> {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Inserts `value` as the most recently used and returns its slot.
    pub(super) fn push_front(&mut self, value: T) -> SlotId {
        let node = Slot::Occupied(Node {
            value,
            prev: NIL,
            next: NIL,
        });
        let reusable = self.free;
        let id = match self.slots.get_mut(reusable) {
            Some(slot @ Slot::Vacant { .. }) => {
                if let Slot::Vacant { next_free } = std::mem::replace(slot, node) {
                    self.free = next_free;
                }
                reusable
            }
            _ => {
                self.slots.push(node);
                self.slots.len() - 1
            }
        };
        self.link_front(id);
        self.len += 1;
        id
    }

    pub(super) fn get(&self, id: SlotId) -> Option<&T> {
        self.node(id).map(|node| &node.value)
    }

    /// Marks `id` as the most recently used. Returns false if it is vacant.
    pub(super) fn touch(&mut self, id: SlotId) -> bool {
        if self.node(id).is_none() {
            return false;
        }
        if self.head != id {
            self.unlink(id);
            self.link_front(id);
        }
        true
    }

    /// Slot of the least recently used value.
    pub(super) fn back(&self) -> Option<SlotId> {
        self.node(self.tail).map(|_| self.tail)
    }

    /// Removes the value in `id` and frees the slot for reuse.
    pub(super) fn remove(&mut self, id: SlotId) -> Option<T> {
        self.node(id)?;
        self.unlink(id);
        let slot = self.slots.get_mut(id)?;
        match std::mem::replace(
            slot,
            Slot::Vacant {
                next_free: self.free,
            },
        ) {
            Slot::Occupied(node) => {
                self.free = id;
                self.len -= 1;
                Some(node.value)
            }
            vacant @ Slot::Vacant { .. } => {
                *slot = vacant;
                None
            }
        }
    }

    /// Values from most to least recently used.
    pub(super) fn iter(&self) -> impl Iterator<Item = &T> {
        let mut cursor = self.head;
        std::iter::from_fn(move || {
            let node = self.node(cursor)?;
            cursor = node.next;
            Some(&node.value)
        })
    }

    fn node(&self, id: SlotId) -> Option<&Node<T>> {
        match self.slots.get(id)? {
            Slot::Occupied(node) => Some(node),
            Slot::Vacant { .. } => None,
        }
    }

    fn node_mut(&mut self, id: SlotId) -> Option<&mut Node<T>> {
        match self.slots.get_mut(id)? {
            Slot::Occupied(node) => Some(node),
            Slot::Vacant { .. } => None,
        }
    }

    /// Detaches `id` from its neighbours, patching head and tail.
    fn unlink(&mut self, id: SlotId) {
        let Some(&Node { prev, next, .. }) = self.node(id) else {
            return;
        };
        match self.node_mut(prev) {
            Some(before) => before.next = next,
            None => self.head = next,
        }
        match self.node_mut(next) {
            Some(after) => after.prev = prev,
            None => self.tail = prev,
        }
    }

    /// Attaches a detached `id` at the front.
    fn link_front(&mut self, id: SlotId) {
        let old_head = self.head;
        let Some(node) = self.node_mut(id) else {
            return;
        };
        node.prev = NIL;
        node.next = old_head;
        match self.node_mut(old_head) {
            Some(head) => head.prev = id,
            None => self.tail = id,
        }
        self.head = id;
    }
}
