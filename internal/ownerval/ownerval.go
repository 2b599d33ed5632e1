// Package ownerval is how the stores that keep a lock's holder as one
// piece of data (an etcd key's value, a ZooKeeper node's data) keep the
// value the holder set beside its owner id (backend.Announcer.SetValue):
// "owner\nvalue". An owner id is printable ASCII without spaces, so the
// first newline ends it; data without one is an owner alone, as every
// lock holds until its holder sets a value.
package ownerval

import "bytes"

// Join returns the data of a lock held by owner with value.
func Join(owner, value string) []byte {
	b := make([]byte, 0, len(owner)+1+len(value))
	b = append(b, owner...)
	b = append(b, '\n')
	return append(b, value...)
}

// Split returns the owner and the value ("" if none) in a lock's data.
func Split(data []byte) (owner, value string) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return string(data[:i]), string(data[i+1:])
	}
	return string(data), ""
}
