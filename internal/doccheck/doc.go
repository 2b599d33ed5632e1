// Package doccheck holds only a test: that claims of the docs about the
// drivers (which implements what, their limits) agree with the code. It
// lives apart from the library's packages so that its imports of every
// driver never reach the go.sum of a program importing one of them.
package doccheck
