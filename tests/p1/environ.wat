;; A preview-1 program that prints, for each name given as an argument, the
;; environment entry `NAME=value` it was given (as `environ_get` wrote it),
;; followed by a newline; nothing for a name it was not given.
;;
;; Its heap is managed the way AssemblyScript's runtime (TLSF) manages one:
;; at the first allocation it takes all memory from its heap base up to
;; `memory.size()` as its own and writes its bookkeeping at the end of that
;; memory; it sizes the environment (and the arguments) with
;; `environ_sizes_get` (`args_sizes_get`) into static memory before that
;; first allocation, as `process.env` does.
(module
  (import "wasi_snapshot_preview1" "environ_sizes_get" (func $environ_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_get" (func $environ_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $args_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_get" (func $args_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 1)
  ;; 16: a count, 20: a size; 32: an iovec; 40: nwritten
  (data (i32.const 48) "\n")
  (global $heap (mut i32) (i32.const 1024))
  (global $end (mut i32) (i32.const 0))

  (func $alloc (param $size i32) (result i32) (local $p i32)
    (if (i32.eqz (global.get $end)) (then
      (global.set $end (i32.shl (memory.size) (i32.const 16)))
      (memory.fill (i32.sub (global.get $end) (i32.const 64)) (i32.const 0xaa) (i32.const 64))))
    (local.set $p (global.get $heap))
    (global.set $heap
      (i32.and (i32.add (i32.add (local.get $p) (local.get $size)) (i32.const 7)) (i32.const -8)))
    (if (i32.gt_u (global.get $heap) (i32.sub (global.get $end) (i32.const 64))) (then unreachable))
    (local.get $p))

  (func $write (param $ptr i32) (param $len i32)
    (i32.store (i32.const 32) (local.get $ptr))
    (i32.store (i32.const 36) (local.get $len))
    (if (call $fd_write (i32.const 1) (i32.const 32) (i32.const 1) (i32.const 40))
      (then (call $proc_exit (i32.const 74)))))

  (func $strlen (param $s i32) (result i32) (local $n i32)
    (block $done (loop $next
      (br_if $done (i32.eqz (i32.load8_u (i32.add (local.get $s) (local.get $n)))))
      (local.set $n (i32.add (local.get $n) (i32.const 1)))
      (br $next)))
    (local.get $n))

  ;; Whether entry `$e` is `$name=...`.
  (func $names (param $e i32) (param $name i32) (result i32) (local $c i32)
    (block $differ (loop $next
      (local.set $c (i32.load8_u (local.get $name)))
      (if (i32.eqz (local.get $c))
        (then (return (i32.eq (i32.load8_u (local.get $e)) (i32.const 61)))))
      (br_if $differ (i32.ne (i32.load8_u (local.get $e)) (local.get $c)))
      (local.set $e (i32.add (local.get $e) (i32.const 1)))
      (local.set $name (i32.add (local.get $name) (i32.const 1)))
      (br $next)))
    (i32.const 0))

  (func (export "_start")
    (local $count i32) (local $environ i32) (local $buf i32)
    (local $argc i32) (local $argv i32) (local $i i32) (local $j i32) (local $e i32)
    (if (call $environ_sizes_get (i32.const 16) (i32.const 20))
      (then (call $proc_exit (i32.const 71))))
    (local.set $count (i32.load (i32.const 16)))
    (local.set $environ (call $alloc (i32.shl (local.get $count) (i32.const 2))))
    (local.set $buf (call $alloc (i32.load (i32.const 20))))
    (if (call $environ_get (local.get $environ) (local.get $buf))
      (then (call $proc_exit (i32.const 72))))
    (if (call $args_sizes_get (i32.const 16) (i32.const 20))
      (then (call $proc_exit (i32.const 71))))
    (local.set $argc (i32.load (i32.const 16)))
    (local.set $argv (call $alloc (i32.shl (local.get $argc) (i32.const 2))))
    (local.set $buf (call $alloc (i32.load (i32.const 20))))
    (if (call $args_get (local.get $argv) (local.get $buf))
      (then (call $proc_exit (i32.const 72))))
    (local.set $i (i32.const 1))
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $argc)))
      (local.set $j (i32.const 0))
      (block $found (loop $scan
        (br_if $found (i32.ge_u (local.get $j) (local.get $count)))
        (local.set $e (i32.load (i32.add (local.get $environ) (i32.shl (local.get $j) (i32.const 2)))))
        (if (call $names (local.get $e)
              (i32.load (i32.add (local.get $argv) (i32.shl (local.get $i) (i32.const 2)))))
          (then
            (call $write (local.get $e) (call $strlen (local.get $e)))
            (call $write (i32.const 48) (i32.const 1))))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br $scan)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next))))
)
