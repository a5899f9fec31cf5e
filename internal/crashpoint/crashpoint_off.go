//go:build !failpoints

package crashpoint

// At is a crash point; without the failpoints tag it does nothing.
func At(string) {}
