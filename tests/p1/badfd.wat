;; A preview-1 program that writes to descriptor 99, which it never
;; opened, then prints the errno `fd_write` returned (two digits) and goes
;; on: `fd_write(99) = 08` is EBADF.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  ;; 32: an iovec; 40: nwritten
  (data (i32.const 64) "lost\n")
  (data (i32.const 80) "fd_write(99) = 00\n")
  (func (export "_start") (local $errno i32)
    (i32.store (i32.const 32) (i32.const 64))
    (i32.store (i32.const 36) (i32.const 5))
    (local.set $errno (call $fd_write (i32.const 99) (i32.const 32) (i32.const 1) (i32.const 40)))
    (i32.store8 (i32.const 95) (i32.add (i32.const 48) (i32.div_u (local.get $errno) (i32.const 10))))
    (i32.store8 (i32.const 96) (i32.add (i32.const 48) (i32.rem_u (local.get $errno) (i32.const 10))))
    (i32.store (i32.const 32) (i32.const 80))
    (i32.store (i32.const 36) (i32.const 18))
    (if (call $fd_write (i32.const 1) (i32.const 32) (i32.const 1) (i32.const 40))
      (then unreachable)))
)
