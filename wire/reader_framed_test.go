package wire

import "testing"

// TestReaderFramed: Framed is true exactly while a whole frame is
// buffered, so ReadFrame would not read: two frames arriving in pieces.
func TestReaderFramed(t *testing.T) {
	var data []byte
	for _, s := range []uint32{1, 3} {
		var err error
		if data, err = AppendFrame(data, s, &Cancel{}); err != nil {
			t.Fatal(err)
		}
	}
	one := len(data) / 2
	r := NewReader(&chunkReader{data: data, sizes: []int{one + 3, one - 3}}, nil)
	if r.Framed() {
		t.Fatal("framed before any read")
	}
	if _, err := r.ReadFrame(); err != nil { // reads one frame and 3 bytes of the next
		t.Fatal(err)
	}
	if r.Framed() || r.Buffered() != 3 {
		t.Fatalf("framed %v with %d bytes of the second frame", r.Framed(), r.Buffered())
	}
	r = NewReader(&chunkReader{data: data, sizes: []int{len(data)}}, nil)
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if !r.Framed() {
		t.Fatal("the second frame is buffered whole, yet not framed")
	}
}
