package main

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The shim reads and writes only a few flat JSON documents (process.json,
// runc's log lines, its own log and start lines), so it carries this small
// reader and writer instead of encoding/json: with reflect and fmt that
// package would make up a third of the binary, and on this kernel the whole
// binary is resident in every shim.

var errJSON = errors.New("malformed JSON")

// jsonObject parses data as one JSON object and returns its members as raw
// JSON values, to be read with jsonString, jsonBool, jsonInt, jsonStrings.
// A repeated key keeps its last value, as in encoding/json.
func jsonObject(data []byte) (map[string][]byte, error) {
	s := &jsonScanner{data: data}
	members := map[string][]byte{}
	err := s.object(func(key string, raw []byte) error {
		members[key] = raw
		return nil
	})
	if err != nil {
		return nil, err
	}
	if s.ws(); s.pos != len(s.data) {
		return nil, errJSON
	}
	return members, nil
}

// jsonString reads a raw string value; null and absent are "".
func jsonString(raw []byte) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	s := &jsonScanner{data: raw}
	return s.str()
}

// jsonBool reads a raw boolean; null and absent are false.
func jsonBool(raw []byte) (bool, error) {
	switch string(raw) {
	case "true":
		return true, nil
	case "false", "null", "":
		return false, nil
	}
	return false, errJSON
}

// jsonInt reads a raw integer; null and absent are 0.
func jsonInt(raw []byte) (int, error) {
	if isNull(raw) {
		return 0, nil
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil {
		return 0, errJSON
	}
	return n, nil
}

// jsonStrings reads a raw array of strings; null and absent are nil.
func jsonStrings(raw []byte) ([]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var out []string
	s := &jsonScanner{data: raw}
	err := s.array(func(v []byte) error {
		str, err := jsonString(v)
		out = append(out, str)
		return err
	})
	return out, err
}

func isNull(raw []byte) bool { return len(raw) == 0 || string(raw) == "null" }

// jsonScanner walks JSON text; each method starts at pos (after optional
// white space) and leaves pos after what it read.
type jsonScanner struct {
	data []byte
	pos  int
}

func (s *jsonScanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// next skips white space and returns the next byte (0 at the end).
func (s *jsonScanner) next() byte {
	if s.ws(); s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

// expect consumes c or fails.
func (s *jsonScanner) expect(c byte) error {
	if s.next() != c {
		return errJSON
	}
	s.pos++
	return nil
}

// value checks one value and returns its raw text.
func (s *jsonScanner) value() ([]byte, error) {
	c := s.next()
	start := s.pos
	var err error
	switch {
	case c == '{':
		err = s.object(func(string, []byte) error { return nil })
	case c == '[':
		err = s.array(func([]byte) error { return nil })
	case c == '"':
		_, err = s.str()
	case c == 't':
		err = s.word("true")
	case c == 'f':
		err = s.word("false")
	case c == 'n':
		err = s.word("null")
	case c == '-' || (c >= '0' && c <= '9'):
		err = s.number()
	default:
		err = errJSON
	}
	return s.data[start:s.pos], err
}

func (s *jsonScanner) word(w string) error {
	if len(s.data)-s.pos < len(w) || string(s.data[s.pos:s.pos+len(w)]) != w {
		return errJSON
	}
	s.pos += len(w)
	return nil
}

// number checks a number against JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) number() error {
	s.skip("-")
	if s.skip("0") == 0 && s.digits() == 0 {
		return errJSON
	}
	if s.skip(".") == 1 && s.digits() == 0 {
		return errJSON
	}
	if s.skip("eE") == 1 {
		s.skip("+-")
		if s.digits() == 0 {
			return errJSON
		}
	}
	return nil
}

// skip consumes one byte if it is one of set, and says how many it took.
func (s *jsonScanner) skip(set string) int {
	if s.pos < len(s.data) && indexByte(set, s.data[s.pos]) >= 0 {
		s.pos++
		return 1
	}
	return 0
}

// digits consumes a run of decimal digits and says how many.
func (s *jsonScanner) digits() int {
	start := s.pos
	for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
		s.pos++
	}
	return s.pos - start
}

// object reads {"key": value, ...}, calling fn for each member.
func (s *jsonScanner) object(fn func(key string, raw []byte) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.next() == '}' {
		s.pos++
		return nil
	}
	for {
		key, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		raw, err := s.value()
		if err == nil {
			err = fn(key, raw)
		}
		if err != nil {
			return err
		}
		if done, err := s.endOf('}'); done || err != nil {
			return err
		}
	}
}

// array reads [value, ...], calling fn for each element.
func (s *jsonScanner) array(fn func(raw []byte) error) error {
	if err := s.expect('['); err != nil {
		return err
	}
	if s.next() == ']' {
		s.pos++
		return nil
	}
	for {
		raw, err := s.value()
		if err == nil {
			err = fn(raw)
		}
		if err != nil {
			return err
		}
		if done, err := s.endOf(']'); done || err != nil {
			return err
		}
	}
}

// endOf reads the ',' between members or the closing byte.
func (s *jsonScanner) endOf(closing byte) (bool, error) {
	switch s.next() {
	case ',':
		s.pos++
		return false, nil
	case closing:
		s.pos++
		return true, nil
	}
	return false, errJSON
}

// str reads a string, decoding its escapes.
func (s *jsonScanner) str() (string, error) {
	if err := s.expect('"'); err != nil {
		return "", err
	}
	var out []byte
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		s.pos++
		switch {
		case c == '"':
			return string(out), nil
		case c == '\\':
			var err error
			if out, err = s.escape(out); err != nil {
				return "", err
			}
		case c < 0x20:
			return "", errJSON
		default:
			out = append(out, c)
		}
	}
	return "", errJSON
}

// escape decodes the escape after a backslash and appends it to out.
func (s *jsonScanner) escape(out []byte) ([]byte, error) {
	if s.pos >= len(s.data) {
		return nil, errJSON
	}
	c := s.data[s.pos]
	s.pos++
	if i := indexByte(`"\/bfnrt`, c); i >= 0 {
		return append(out, "\"\\/\b\f\n\r\t"[i]), nil
	}
	if c != 'u' {
		return nil, errJSON
	}
	r, err := s.hex4()
	if err != nil {
		return nil, err
	}
	if utf16.IsSurrogate(r) && s.word(`\u`) == nil {
		r2, err := s.hex4()
		if err != nil {
			return nil, err
		}
		if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
			r = pair
		} else { // a lone surrogate, then an escape of its own
			out, r = utf8.AppendRune(out, utf8.RuneError), r2
		}
	}
	return utf8.AppendRune(out, r), nil
}

func (s *jsonScanner) hex4() (rune, error) {
	if len(s.data)-s.pos < 4 {
		return 0, errJSON
	}
	n, err := strconv.ParseUint(string(s.data[s.pos:s.pos+4]), 16, 32)
	if err != nil {
		return 0, errJSON
	}
	s.pos += 4
	return rune(n), nil
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD, as with encoding/json.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r == '\t':
			b = append(b, '\\', 't')
		case r < 0x20:
			b = append(b, `\u00`...)
			b = append(b, "0123456789abcdef"[r>>4], "0123456789abcdef"[r&0xf])
		default:
			b = utf8.AppendRune(b, r) // a bad byte came as RuneError: U+FFFD
		}
	}
	return append(b, '"')
}
