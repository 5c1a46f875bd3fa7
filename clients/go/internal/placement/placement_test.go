package placement

import "testing"

// The values pinned by the Rust crate's tests (placement/src/lib.rs, hash.rs).
func TestPinnedVectors(t *testing.T) {
	if got := FNV1a(FNVOffset, []byte("foobar")); got != 0x85944171f73967e8 {
		t.Fatalf("fnv1a(foobar) = %#x", got)
	}
	if got := Mix(0x9e3779b97f4a7c15); got != 0xe220a8397b1dcdaf {
		t.Fatalf("mix = %#x", got)
	}
	if got := Score("starling-0", Topic, []byte("orders")); got != 0x0719a572fdea5663 {
		t.Fatalf("score = %#x", got)
	}
	if got := Score("starling-1", CacheKey, []byte("session:42")); got != 0xffca9395f7183b8a {
		t.Fatalf("score = %#x", got)
	}
	ms := []string{"starling-0", "starling-1", "starling-2"}
	if got := Owner(ms, Topic, []byte("orders")); got != 2 {
		t.Fatalf("owner = %d", got)
	}
	if Owner(nil, Topic, []byte("x")) != -1 {
		t.Fatal("no members, no owner")
	}
}
