// Pins nsqd, the NSQ peer of bench/compare; bench/nsq/build.sh builds it
// from here (a `go install …@version` refuses nsqd: its go.mod has a replace).
module starling.invalid/bench/nsqd

go 1.26.0

tool github.com/nsqio/nsq/apps/nsqd

require (
	github.com/BurntSushi/toml v1.3.2 // indirect
	github.com/blang/semver v3.5.1+incompatible // indirect
	github.com/bmizerany/perks v0.0.0-20141205001514-d9a9656a3a4b // indirect
	github.com/golang/snappy v0.0.4 // indirect
	github.com/judwhite/go-svc v1.2.1 // indirect
	github.com/julienschmidt/httprouter v1.3.0 // indirect
	github.com/mreiferson/go-options v1.0.0 // indirect
	github.com/nsqio/go-diskqueue v1.1.0 // indirect
	github.com/nsqio/go-nsq v1.1.0 // indirect
	github.com/nsqio/nsq v1.3.0 // indirect
	golang.org/x/sys v0.10.0 // indirect
)

// nsqd's own go.mod replaces go-svc with a fork that has the svc.ErrStop
// nsqd uses; a replace applies only in the main module, so it is repeated here.
replace github.com/judwhite/go-svc => github.com/mreiferson/go-svc v1.2.2-0.20210815184239-7a96e00010f6
