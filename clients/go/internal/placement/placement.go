// Package placement is the rendezvous function that places topics and cache
// keys on cluster members, the same as the brokers' (Rust crate
// starling-placement): every member scores every key with FNV-1a over the
// member id, the bytes 0xff and a kind tag ('t' topic, 'k' cache key), and
// the key, finished with the splitmix64 mixer; the highest score owns the key
// and ties go to the smaller member id.
package placement

// FNVOffset is the FNV-1a offset basis.
const FNVOffset uint64 = 0xcbf29ce484222325

const fnvPrime uint64 = 0x00000100000001b3

// FNV1a continues a 64-bit FNV-1a hash from seed over b.
func FNV1a(seed uint64, b []byte) uint64 {
	h := seed
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}

// Mix is the splitmix64 finaliser.
func Mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Kind separates topics from cache keys, so the same bytes may have
// different owners as a topic and as a key.
type Kind byte

const (
	// Topic places a pub/sub topic.
	Topic Kind = 't'
	// CacheKey places a cache key.
	CacheKey Kind = 'k'
)

// Score is member's score for key.
func Score(member string, kind Kind, key []byte) uint64 {
	h := FNV1a(FNVOffset, []byte(member))
	h = FNV1a(h, []byte{0xff, byte(kind)})
	return Mix(FNV1a(h, key))
}

// Owner is the index in members of the owner of key, or -1 without members.
func Owner(members []string, kind Kind, key []byte) int {
	best := -1
	var bestScore uint64
	for i, m := range members {
		s := Score(m, kind, key)
		if best < 0 || s > bestScore || (s == bestScore && m < members[best]) {
			best, bestScore = i, s
		}
	}
	return best
}
