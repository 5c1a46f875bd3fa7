//! The slab-backed LRU list on its own.

use crate::cache::lru::LruSlab;

fn order(slab: &LruSlab<u32>) -> Vec<u32> {
    slab.iter().copied().collect()
}

#[test]
fn push_touch_remove_keep_recency_order() {
    let mut slab = LruSlab::default();
    let a = slab.push_front(1);
    let b = slab.push_front(2);
    let c = slab.push_front(3);
    assert_eq!(order(&slab), vec![3, 2, 1]);
    assert_eq!(slab.back(), Some(a));

    assert!(slab.touch(a));
    assert_eq!(order(&slab), vec![1, 3, 2]);
    assert_eq!(slab.back(), Some(b));

    assert_eq!(slab.remove(c), Some(3));
    assert_eq!(slab.remove(c), None);
    assert!(!slab.touch(c));
    assert_eq!(order(&slab), vec![1, 2]);
    assert_eq!(slab.len(), 2);

    // The freed slot is reused.
    let d = slab.push_front(4);
    assert_eq!(d, c);
    assert_eq!(order(&slab), vec![4, 1, 2]);

    assert_eq!(slab.remove(b), Some(2));
    assert_eq!(slab.remove(a), Some(1));
    assert_eq!(slab.remove(d), Some(4));
    assert_eq!(slab.len(), 0);
    assert_eq!(slab.back(), None);
    assert_eq!(order(&slab), Vec::<u32>::new());
}

#[test]
fn touching_the_head_or_tail_is_safe() {
    let mut slab = LruSlab::default();
    let a = slab.push_front(1);
    assert!(slab.touch(a));
    let b = slab.push_front(2);
    assert!(slab.touch(b));
    assert!(slab.touch(a));
    assert_eq!(order(&slab), vec![1, 2]);
    assert_eq!(slab.get(b), Some(&2));
    assert_eq!(slab.get(usize::MAX), None);
}
