;; A preview-1 program that writes to descriptors it never had and prints
;; the errno each `fd_write` returned (two digits), one line per
;; descriptor, then goes on:
;;
;;   fd_write(FD) = A B C D
;;
;; A: one iovec of 5 bytes; B: one iovec of 0 bytes; C: no iovec at all
;; (`iovs_len` 0); D: `fd_read` with no iovec. `08` is EBADF. The descriptors: 3 to 16, 99, 1000,
;; 65535, 65536, i32::MAX, i32::MIN, -31337 (the value of a public WASI
;; test suite's `fd_write` test), -2 and -1 (u32::MAX), printed as signed
;; i32s. Then, as controls, the descriptors it has: 1 and 2, with the
;; empty calls only (`A` is `--`), which succeed (`00`).
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  ;; 0: the line being built (global $len bytes); 256: an iovec;
  ;; 264: nwritten; 300: scratch for digits
  (global $len (mut i32) (i32.const 0))
  (data (i32.const 512) "lost\n")
  (data (i32.const 528) "fd_write(")
  (data (i32.const 544) ") = ")

  (func $put (param $byte i32)
    (i32.store8 (global.get $len) (local.get $byte))
    (global.set $len (i32.add (global.get $len) (i32.const 1))))

  (func $bytes (param $ptr i32) (param $n i32)
    (block $done
      (loop $next
        (br_if $done (i32.eqz (local.get $n)))
        (call $put (i32.load8_u (local.get $ptr)))
        (local.set $ptr (i32.add (local.get $ptr) (i32.const 1)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $next))))

  ;; `v` in signed decimal (i32::MIN included: its magnitude is taken
  ;; unsigned).
  (func $decimal (param $v i32) (local $m i32) (local $k i32)
    (local.set $m (local.get $v))
    (if (i32.lt_s (local.get $v) (i32.const 0))
      (then
        (call $put (i32.const 45))
        (local.set $m (i32.sub (i32.const 0) (local.get $v)))))
    (loop $digit
      (i32.store8 (i32.add (i32.const 300) (local.get $k))
        (i32.add (i32.const 48) (i32.rem_u (local.get $m) (i32.const 10))))
      (local.set $k (i32.add (local.get $k) (i32.const 1)))
      (local.set $m (i32.div_u (local.get $m) (i32.const 10)))
      (br_if $digit (local.get $m)))
    (loop $out
      (local.set $k (i32.sub (local.get $k) (i32.const 1)))
      (call $put (i32.load8_u (i32.add (i32.const 300) (local.get $k))))
      (br_if $out (local.get $k))))

  (func $errno (param $e i32)
    (call $put (i32.add (i32.const 48) (i32.div_u (local.get $e) (i32.const 10))))
    (call $put (i32.add (i32.const 48) (i32.rem_u (local.get $e) (i32.const 10)))))

  ;; fd_write(fd) with `n` iovecs of `len` bytes each ("lost\n"): its errno.
  (func $write (param $fd i32) (param $n i32) (param $len i32) (result i32)
    (i32.store (i32.const 256) (i32.const 512))
    (i32.store (i32.const 260) (local.get $len))
    (call $fd_write (local.get $fd) (i32.const 256) (local.get $n) (i32.const 264)))

  (func $probe (param $fd i32) (param $full i32)
    (call $bytes (i32.const 528) (i32.const 9))
    (call $decimal (local.get $fd))
    (call $bytes (i32.const 544) (i32.const 4))
    (if (local.get $full)
      (then (call $errno (call $write (local.get $fd) (i32.const 1) (i32.const 5))))
      (else (call $put (i32.const 45)) (call $put (i32.const 45))))
    (call $put (i32.const 32))
    (call $errno (call $write (local.get $fd) (i32.const 1) (i32.const 0)))
    (call $put (i32.const 32))
    (call $errno (call $write (local.get $fd) (i32.const 0) (i32.const 0)))
    (call $put (i32.const 32))
    (call $errno (call $fd_read (local.get $fd) (i32.const 256) (i32.const 0) (i32.const 264)))
    (call $put (i32.const 10))
    ;; The line, to stdout; a failure there ends the program.
    (i32.store (i32.const 256) (i32.const 0))
    (i32.store (i32.const 260) (global.get $len))
    (if (call $fd_write (i32.const 1) (i32.const 256) (i32.const 1) (i32.const 264))
      (then unreachable))
    (global.set $len (i32.const 0)))

  (func (export "_start") (local $fd i32)
    (local.set $fd (i32.const 3))
    (loop $low
      (call $probe (local.get $fd) (i32.const 1))
      (local.set $fd (i32.add (local.get $fd) (i32.const 1)))
      (br_if $low (i32.le_s (local.get $fd) (i32.const 16))))
    (call $probe (i32.const 99) (i32.const 1))
    (call $probe (i32.const 1000) (i32.const 1))
    (call $probe (i32.const 65535) (i32.const 1))
    (call $probe (i32.const 65536) (i32.const 1))
    (call $probe (i32.const 2147483647) (i32.const 1))
    (call $probe (i32.const -2147483648) (i32.const 1))
    (call $probe (i32.const -31337) (i32.const 1))
    (call $probe (i32.const -2) (i32.const 1))
    (call $probe (i32.const -1) (i32.const 1))
    (call $probe (i32.const 1) (i32.const 0))
    (call $probe (i32.const 2) (i32.const 0)))
)
