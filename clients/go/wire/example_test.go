package wire_test

import (
	"bytes"
	"fmt"

	"starling.invalid/starling/wire"
)

// Encoding a frame and reading it back with the streaming Reader.
func ExampleReader() {
	raw := wire.Encode(&wire.Publish{RequestID: 1, Ack: wire.Ack, Topic: "orders", Payload: []byte("hello")})
	fmt.Printf("% x\n", raw[:8])
	f, err := wire.NewReader(bytes.NewReader(raw), 1<<20).ReadFrame()
	if err != nil {
		fmt.Println(err)
		return
	}
	p := f.(*wire.Publish)
	fmt.Println(f.Kind(), p.Topic, string(p.Payload))
	// Output:
	// 01 10 00 00 00 00 00 1a
	// publish orders hello
}

// A header announcing more than the limit is refused before its payload.
func ExampleDecoder() {
	_, _, err := wire.Decoder{MaxFrameBytes: 16}.Decode([]byte{1, 0x10, 0, 0, 0, 0, 0, 17})
	fmt.Println(err)
	// Output:
	// frame payload of 17 bytes exceeds the limit of 16 bytes
}
