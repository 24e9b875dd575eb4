# nvme-sweep.sh: nvme-cli across the NVMe admin and I/O command sets against one vNVMe, each
# status checked against what NVMe 1.4 says this controller must answer; sourced by a guest /init.
#
# usage: . /nvme-sweep.sh SERIAL   (the controller whose serial starts with SERIAL; it must hold
#        nothing of value: commands write, zero and deallocate its first blocks)
# Needs /sys, /dev (devtmpfs) and a writable /tmp. Prints one line per command,
#   SWEEP <n> <name> want=<SCT/SC> got=<SCT/SC> ok|MISMATCH
# with SCT/SC as three hex digits (000 success; DNR and More masked), "eNN" when nvme-cli exited
# NN without an NVMe status, the first output line after a mismatch, and at the end
#   LVMM-SWEEP-DONE run=<commands> mismatches=<n>
# Shell builtins only but for nvme, dd and cmp: every exec costs seconds in an emulated guest.

sweep_run=0
sweep_bad=0

# Three hex digits of $1 into sweep_hex, without a subshell.
sweep_hex3() {
	sweep_hex=
	_v=$1
	for _i in 1 2 3; do
		_d=$((_v & 15))
		_v=$((_v >> 4))
		case $_d in
		10) _d=a ;; 11) _d=b ;; 12) _d=c ;; 13) _d=d ;; 14) _d=e ;; 15) _d=f ;;
		esac
		sweep_hex=$_d$sweep_hex
	done
}

# t WANT NAME CMD...: runs CMD, compares its NVMe status with WANT (three hex digits).
t() {
	_want=$1
	_name=$2
	shift 2
	_out=$("$@" 2>&1)
	_rc=$?
	case $_out in
	*"NVMe status: "* | *"NVMe Status: "*)
		_s=${_out##*NVMe [Ss]tatus: }
		_s=${_s%%
*}
		_s=${_s##*\(}
		_s=${_s%%\)*}
		case $_s in
		0x* | [0-9]*) sweep_hex3 $((_s & 0x7ff)); _got=$sweep_hex ;;
		*) _got="?$_s" ;;
		esac
		;;
	*)
		if [ $_rc = 0 ]; then _got=000; else _got=e$_rc; fi
		;;
	esac
	sweep_last=$_out
	sweep_run=$((sweep_run + 1))
	if [ "$_got" = "$_want" ]; then
		echo "SWEEP $sweep_run $_name want=$_want got=$_got ok"
	else
		sweep_bad=$((sweep_bad + 1))
		echo "SWEEP $sweep_run $_name want=$_want got=$_got MISMATCH"
		echo "SWEEP-OUT ${_out%%
*}"
	fi
}

# v NAME PATTERN: the last command's output must match the shell PATTERN (a value check).
v() {
	sweep_run=$((sweep_run + 1))
	case $sweep_last in
	$2) echo "SWEEP $sweep_run $1 want=match got=match ok" ;;
	*)
		sweep_bad=$((sweep_bad + 1))
		echo "SWEEP $sweep_run $1 want=match got=other MISMATCH"
		echo "SWEEP-OUT ${sweep_last%%
*}"
		;;
	esac
}

sweep() {
	C=
	for _f in /sys/class/nvme/nvme*/serial; do
		read -r _sn <"$_f"
		case $_sn in "$1"*) _d=${_f%/serial}; C=/dev/${_d##*/} ;; esac
	done
	if [ -z "$C" ] || [ ! -c "$C" ] || [ ! -b "${C}n1" ]; then
		echo "LVMM-SWEEP-DONE run=0 mismatches=1 (no controller with serial $1)"
		return 1
	fi
	N=${C}n1
	read -r _sectors </sys/block/${N##*/}/size
	END=$_sectors # 512-byte LBAs: the first block past the namespace
	if [ "$END" != 8192 ]; then
		echo "LVMM-SWEEP-DONE run=0 mismatches=1 (want a 4 MiB disk, $END blocks)"
		return 1
	fi
	P=/tmp/sweep-pat
	R=/tmp/sweep-rd
	D=/tmp/sweep-dsm
	# one DSM range: attributes 0, 1 block, LBA 8192 (0x2000: the first past a 4 MiB disk)
	printf '\000\000\000\000\001\000\000\000\000\040\000\000\000\000\000\000' >$D
	# a block of the nvme binary as the pattern: /dev/urandom can block for minutes in a
	# guest whose entropy pool is not ready yet
	dd if=/usr/sbin/nvme of=$P bs=4096 count=1 skip=16 2>/dev/null
	echo "SWEEP-START $C $END blocks"

	# ---- Identify ----
	t 000 id-ctrl nvme id-ctrl $C
	v id-ctrl-oncs-save '*oncs*0x1c*'
	v id-ctrl-vwc '*vwc*0x1*'
	t 000 id-ns-1 nvme id-ns $C -n 1
	t 000 id-ns-blockdev nvme id-ns $N
	t 00b id-ns-ffffffff nvme admin-passthru $C --opcode=0x06 --namespace-id=0xffffffff --cdw10=0 --data-len=4096 --read
	t 00b id-ns-2 nvme admin-passthru $C --opcode=0x06 --namespace-id=2 --cdw10=0 --data-len=4096 --read
	t 00b id-ns-0 nvme admin-passthru $C --opcode=0x06 --namespace-id=0 --cdw10=0 --data-len=4096 --read
	t 000 list-ns nvme list-ns $C
	t 00b active-list-fffffffe nvme admin-passthru $C --opcode=0x06 --namespace-id=0xfffffffe --cdw10=2 --data-len=4096 --read
	t 000 ns-descs-1 nvme ns-descs $C -n 1
	t 002 identify-cns-10h nvme admin-passthru $C --opcode=0x06 --cdw10=0x10 --data-len=4096 --read
	t 000 list nvme list
	t 000 list-subsys nvme list-subsys
	# the subsystem NQN ends with the serial, no padding after it
	v subnqn-unpadded "*nqn.2026-11.io.lvmm:nvme:$1
*"

	# ---- Get Log Page ----
	t 000 smart-log nvme smart-log $C
	t 002 smart-log-nsid-1 nvme admin-passthru $C --opcode=0x02 --namespace-id=1 --cdw10=0x007f0002 --data-len=512 --read
	t 000 smart-log-nsid-0 nvme admin-passthru $C --opcode=0x02 --namespace-id=0 --cdw10=0x007f0002 --data-len=512 --read
	t 000 error-log nvme error-log $C
	t 000 fw-log nvme fw-log $C
	t 000 get-log-01 nvme get-log $C --log-id=1 --log-len=64
	t 000 get-log-02 nvme get-log $C --log-id=2 --log-len=512
	t 000 get-log-03 nvme get-log $C --log-id=3 --log-len=512
	t 000 get-log-02-offset-4 nvme get-log $C --log-id=2 --log-len=64 --lpo=4
	t 000 get-log-02-longer nvme admin-passthru $C --opcode=0x02 --namespace-id=0xffffffff --cdw10=0x03ff0002 --data-len=4096 --read
	t 002 get-log-02-offset-past nvme admin-passthru $C --opcode=0x02 --namespace-id=0xffffffff --cdw10=0x000f0002 --cdw12=1024 --data-len=64 --read
	t 002 get-log-02-offset-unaligned nvme admin-passthru $C --opcode=0x02 --namespace-id=0xffffffff --cdw10=0x000f0002 --cdw12=2 --data-len=64 --read
	for _l in 04 06 c0; do
		t 109 get-log-$_l nvme admin-passthru $C --opcode=0x02 --namespace-id=0xffffffff --cdw10=0x000f00$_l --data-len=64 --read
	done

	# ---- Get Features: every select of every feature offered, and those that are not ----
	for _f in 4 6 9; do
		for _sel in 0 1 2 3; do
			t 000 get-feature-$_f-sel$_sel nvme get-feature $C -f $_f -s $_sel
		done
	done
	for _f in 1 2 5 7 8 10 11; do
		t 000 get-feature-$_f nvme get-feature $C -f $_f
	done
	# (refusals through admin-passthru: nvme get-feature keeps Invalid Field to itself)
	for _f in 3 12 0x80; do
		t 002 get-feature-$_f nvme admin-passthru $C --opcode=0x0a --cdw10=$_f --data-len=4096 --read
	done
	t 002 get-feature-sel4 nvme admin-passthru $C --opcode=0x0a --cdw10=0x406
	t 002 get-feature-irq-vector-past nvme admin-passthru $C --opcode=0x0a --cdw10=9 --cdw11=0xffff

	# ---- Set Features ----
	t 000 set-vwc-off nvme set-feature $C -f 6 -v 0
	t 000 get-vwc nvme admin-passthru $C --opcode=0x0a --cdw10=6
	v vwc-reads-off '*result: 0x00000000*'
	t 000 get-vwc-default nvme admin-passthru $C --opcode=0x0a --cdw10=0x106
	v vwc-default-on '*result: 0x00000001*'
	t 000 get-vwc-supported nvme admin-passthru $C --opcode=0x0a --cdw10=0x306
	v vwc-changeable '*result: 0x00000004*'
	t 10d set-vwc-save nvme admin-passthru $C --opcode=0x09 --cdw10=0x80000006 --cdw11=0
	t 000 set-arbitration nvme set-feature $C -f 1 -v 0
	t 000 set-power-state-0 nvme set-feature $C -f 2 -v 0
	t 002 set-power-state-1 nvme admin-passthru $C --opcode=0x09 --cdw10=2 --cdw11=1
	t 000 set-temp-thresh nvme set-feature $C -f 4 -v 0x160
	t 002 set-temp-thresh-sensor-1 nvme admin-passthru $C --opcode=0x09 --cdw10=4 --cdw11=0x10160
	t 000 set-temp-thresh-back nvme set-feature $C -f 4 -v 0x157
	t 00c set-num-queues-late nvme admin-passthru $C --opcode=0x09 --cdw10=7 --cdw11=0
	t 000 set-irq-coalescing nvme set-feature $C -f 8 -v 0
	t 000 set-irq-config nvme set-feature $C -f 9 -v 0x10000
	t 002 set-irq-config-vector-past nvme admin-passthru $C --opcode=0x09 --cdw10=9 --cdw11=0xffff
	t 002 set-feature-3 nvme admin-passthru $C --opcode=0x09 --cdw10=3
	t 002 set-feature-0x80 nvme admin-passthru $C --opcode=0x09 --cdw10=0x80 --cdw11=1

	# ---- I/O with the write cache off: durable writes, then the cache back on ----
	t 000 write-vwc-off nvme write $N --start-block=0 --block-count=7 --data-size=4096 --data=$P
	t 000 set-vwc-on nvme set-feature $C -f 6 -v 1
	t 000 write nvme write $N --start-block=8 --block-count=7 --data-size=4096 --data=$P
	t 000 write-fua nvme write $N --start-block=16 --block-count=7 --data-size=4096 --data=$P --force-unit-access
	t 000 read nvme read $N --start-block=8 --block-count=7 --data-size=4096 --data=$R
	t 000 read-back-equal cmp $P $R
	t 000 read-vwc-off-block nvme read $N --start-block=0 --block-count=7 --data-size=4096 --data=$R
	t 000 read-back-equal-2 cmp $P $R
	t 000 flush nvme flush $N -n 1
	t 000 flush-ctrl nvme flush $C -n 1
	t 000 write-zeroes nvme write-zeroes $N -n 1 --start-block=8 --block-count=7
	t 000 read-zeroed nvme read $N --start-block=8 --block-count=7 --data-size=4096 --data=$R
	t 000 zeroed-differs-from-pattern sh -c "! cmp -s $P $R"
	t 000 dsm-deallocate nvme dsm $N -n 1 --ad --slbs=16 --blocks=8
	t 000 dsm-advisory nvme dsm $N -n 1 --idr --slbs=0 --blocks=8
	# the refusals through io-passthru, whose status line nvme-cli prints the one way
	t 080 dsm-past-end nvme io-passthru $N --opcode=0x09 --namespace-id=1 --cdw11=4 --data-len=16 --write --input-file=$D
	t 080 write-past-end nvme io-passthru $N --opcode=0x01 --namespace-id=1 --cdw10=$END --data-len=512 --write --input-file=$P
	t 080 read-past-end nvme io-passthru $N --opcode=0x02 --namespace-id=1 --cdw10=$END --data-len=512 --read
	t 080 read-straddling-end nvme io-passthru $N --opcode=0x02 --namespace-id=1 --cdw10=$((END - 4)) --cdw12=7 --data-len=4096 --read
	t 080 write-zeroes-past-end nvme io-passthru $N --opcode=0x08 --namespace-id=1 --cdw10=$END
	t 001 compare nvme io-passthru $N --opcode=0x05 --namespace-id=1 --cdw12=7 --data-len=4096 --write --input-file=$P
	t 001 write-uncorrectable nvme io-passthru $N --opcode=0x04 --namespace-id=1
	t 001 verify nvme io-passthru $N --opcode=0x0c --namespace-id=1
	t 001 resv-report nvme io-passthru $N --opcode=0x0e --namespace-id=1 --cdw10=1023 --data-len=4096 --read
	t 001 resv-register nvme io-passthru $N --opcode=0x0d --namespace-id=1 --data-len=16 --write --input-file=$D
	for _o in 0x03 0x7f 0xff; do
		t 001 io-opcode-$_o nvme io-passthru $N --opcode=$_o --namespace-id=1
	done
	t 000 io-passthru-read nvme io-passthru $N --opcode=0x02 --namespace-id=1 --data-len=4096 --read --cdw12=7

	# ---- admin commands this controller does not offer (format refused), queue misuse ----
	t 001 format nvme admin-passthru $C --opcode=0x80 --namespace-id=1
	t 001 sanitize nvme admin-passthru $C --opcode=0x84
	t 001 fw-commit nvme admin-passthru $C --opcode=0x10 --cdw10=0x08
	t 001 device-self-test nvme admin-passthru $C --opcode=0x14 --namespace-id=0xffffffff --cdw10=1
	t 001 ns-management nvme admin-passthru $C --opcode=0x0d
	t 001 keep-alive nvme admin-passthru $C --opcode=0x18
	t 001 directive-send nvme admin-passthru $C --opcode=0x19
	t 001 get-lba-status nvme admin-passthru $C --opcode=0x86
	t 001 admin-opcode-0xc0 nvme admin-passthru $C --opcode=0xc0
	t 000 abort nvme admin-passthru $C --opcode=0x08 --cdw10=0xffff0001
	v abort-not-aborted '*result: 0x00000001*'
	t 101 delete-sq-60 nvme admin-passthru $C --opcode=0x00 --cdw10=60
	t 10c delete-cq-in-use nvme admin-passthru $C --opcode=0x04 --cdw10=1
	t 101 create-cq-id-0 nvme admin-passthru $C --opcode=0x05 --cdw10=0x000f0000 --cdw11=1
	t 002 dbbuf-config-null nvme admin-passthru $C --opcode=0x7c
	echo "LVMM-SWEEP-DONE run=$sweep_run mismatches=$sweep_bad"
}

sweep "${1:-LVMMSWEEP}"
