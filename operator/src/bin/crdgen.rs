//! Prints the BrokerCluster CRD as YAML (`crds/brokercluster.yaml`), with `--user` the
//! BrokerUser CRD (`crds/brokeruser.yaml`), with `--topic` the BrokerTopic CRD
//! (`crds/brokertopic.yaml`), or with `--write-docs PATH` regenerates the reference section
//! of `docs/operator.md`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => {
            print!("{}", starling_operator::crd::crd_yaml());
            ExitCode::SUCCESS
        }
        [flag] if flag == "--user" => {
            print!("{}", starling_operator::crd::user::crd_yaml());
            ExitCode::SUCCESS
        }
        [flag] if flag == "--topic" => {
            print!("{}", starling_operator::crd::topic::crd_yaml());
            ExitCode::SUCCESS
        }
        [flag, path] if flag == "--write-docs" => {
            match starling_operator::docs::update_file(std::path::Path::new(path)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("crdgen: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        _ => {
            eprintln!("usage: crdgen [--user | --topic | --write-docs docs/operator.md]");
            ExitCode::from(2)
        }
    }
}
